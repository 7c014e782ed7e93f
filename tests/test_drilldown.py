"""Drill-down pictures against the lineage macros: a real build of a small sample corpus (memory
systems) plus one Who&When record (multi-agent), the picture drawn, its SVG parsed, and every node
and edge compared with what op_subgraph(), downstream() and upstream() say through DuckDB."""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import build_warehouse, query

from dashboards import drilldown
from pipelines.analytics import db
from pipelines.storage.warehouse import Warehouse

SVG = "{http://www.w3.org/2000/svg}"
PAYLOAD = "<script>window.__pwned=1</script>"
EVIL_AGENT = '<img src=x onerror="window.__pwned=1">_Expert'


def write_whowhen(root: Path) -> str:
    record = {
        "is_correct": "False",
        "question": f"What is 2+2? {PAYLOAD}",
        "question_ID": "00000000-0000-4000-8000-000000000001",
        "level": "1",
        "ground_truth": "4",
        "history": [
            {"content": "Let us compute 2+2.", "role": "user", "name": "Planner_Expert"},
            {"content": f"The answer is 5 {PAYLOAD}", "role": "assistant", "name": EVIL_AGENT},
            {"content": "Verified: 5", "role": "assistant", "name": "Verification_Expert"},
            {"content": "TERMINATE", "role": "assistant", "name": "Planner_Expert"},
        ],
        "mistake_agent": EVIL_AGENT,
        "mistake_step": "1",
        "mistake_reason": "It added wrongly.",
        "system_prompt": {EVIL_AGENT: "You add.", "Planner_Expert": "You plan."},
    }
    path = root / "Algorithm-Generated" / "up.._.._x.json"  # ids end up holding ".." (no "/" in a file name)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(record))
    return f"ww:Algorithm-Generated/{path.stem}#a0"


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> dict:
    from pipelines.sample.corpus import generate_corpus

    root = tmp_path_factory.mktemp("drilldown")
    generate_corpus(root / "corpus", seed=5, graphs_per_split=6)
    multi_id = write_whowhen(root / "ww")
    before = os.environ.get(drilldown.LIMIT_ENV)
    os.environ[drilldown.LIMIT_ENV] = "0"  # the pictures are drawn by the tests themselves
    try:
        summary = build_warehouse(root / "warehouse", [f"memtracebench={root / 'corpus'}", f"ww:whowhen={root / 'ww'}"])
    finally:
        if before is None:
            os.environ.pop(drilldown.LIMIT_ENV, None)
        else:
            os.environ[drilldown.LIMIT_ENV] = before
    assert summary.ok, summary.failed_steps + summary.failed_checks
    return {"path": root / "warehouse", "multi_id": multi_id}


@pytest.fixture()
def con(warehouse):
    connection = db.connect(Warehouse(warehouse["path"]))
    yield connection
    connection.close()


def parse(svg_path: Path) -> dict:
    """Nodes (id -> css roles) and edges of a drawn picture, and all its text."""
    root = ET.fromstring(svg_path.read_text())
    nodes, op_edges, path_edges, elided = {}, [], [], 0
    for g in root.iter(f"{SVG}g"):
        classes = set(g.get("class", "").split())
        if "node" in classes and g.get("data-node-id") is not None:
            nodes.setdefault(g.get("data-node-id"), set()).update(classes - {"node"})
        elif "elided" in classes:
            elided += 1
        elif "edge" in classes:
            src, dst, op = g.get("data-source"), g.get("data-target"), g.get("data-op")
            (path_edges if src and dst else op_edges).append((src, dst, op))
    texts = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
    return {"root": root, "nodes": nodes, "op_edges": op_edges, "path_edges": path_edges, "elided": elided,
            "texts": texts}


def annotation(warehouse, where: str, params: list | None = None) -> dict:
    rows = query(
        warehouse["path"],
        "select graph_id, annotation_id, faulty_op_id, prediction_node_id, hops_to_prediction "
        f"from failure_propagation where {where} order by annotation_id limit 1",
        params,
    )
    assert rows, where
    return dict(zip(("graph_id", "annotation_id", "op", "prediction", "hops"), rows[0], strict=True))


def op_ends(warehouse, a: dict) -> tuple[set[str], set[str]]:
    rows = query(warehouse["path"], "select role, full_node_id from op_subgraph(?, ?)", [a["graph_id"], a["op"]])
    return {n for r, n in rows if r == "input"}, {n for r, n in rows if r == "output"}


def check_op(picture: dict, a: dict, inputs: set[str], outputs: set[str]) -> None:
    drawn_inputs = {n for n, roles in picture["nodes"].items() if "input" in roles}
    drawn_outputs = {n for n, roles in picture["nodes"].items() if roles & {"output"} or
                     (roles & {"target"} and n in outputs)}
    assert drawn_inputs == inputs
    assert drawn_outputs == outputs
    assert sorted(s for s, d, o in picture["op_edges"] if s) == sorted(inputs)
    assert sorted(d for s, d, o in picture["op_edges"] if d) == sorted(outputs)
    assert {o for _, _, o in picture["op_edges"]} == {a["op"]}


def check_path(warehouse, picture: dict, a: dict, outputs: set[str], target: str, hops: int) -> None:
    """The drawn path is a shortest edge path from an output of the op to the target, per the macros."""
    path = picture["path_edges"]
    assert len(path) == hops
    start = path[0][0]
    assert start in outputs and path[-1][1] == target
    for (_, d1, _), (s2, _, _) in zip(path, path[1:], strict=False):
        assert d1 == s2, "the path is connected"
    graph = a["graph_id"]
    for src, dst, op in path:
        assert query(
            warehouse["path"],
            "select count(*) from edges where graph_id = ? and op_id = ? and source_full_node_id = ? "
            "and target_full_node_id = ?", [graph, op, src, dst],
        )[0][0] >= 1, (src, dst, op)
    down = dict(query(warehouse["path"], "select full_node_id, hops from downstream(?, ?)", [graph, start]))
    up = dict(query(warehouse["path"], "select full_node_id, hops from upstream(?, ?)", [graph, target]))
    assert down[target] == hops
    for k, (_, dst, _) in enumerate(path, 1):
        assert down[dst] == k and (dst == target or up[dst] == hops - k)
    # no output of the operation reaches the target in fewer edges
    for output in outputs:
        reach = dict(query(warehouse["path"], "select full_node_id, hops from downstream(?, ?)", [graph, output]))
        assert output == target or reach.get(target, hops) >= hops
    assert {n for n, roles in picture["nodes"].items() if "target" in roles} == {target}


def test_memory_failure_picture_matches_the_lineage_macros(warehouse, con, tmp_path: Path) -> None:
    a = annotation(warehouse, "graph_kind = 'memory' and hops_to_prediction >= 2")
    svg, png = drilldown.draw(con, a["annotation_id"], tmp_path)
    assert png.read_bytes().startswith(b"\x89PNG")
    picture = parse(svg)
    inputs, outputs = op_ends(warehouse, a)
    assert inputs and outputs
    check_op(picture, a, inputs, outputs)
    check_path(warehouse, picture, a, outputs, a["prediction"], a["hops"])
    path_nodes = {d for _, d, _ in picture["path_edges"]}
    assert set(picture["nodes"]) == inputs | outputs | path_nodes


def test_operation_that_produced_the_prediction(warehouse, con, tmp_path: Path) -> None:
    a = annotation(warehouse, "graph_kind = 'memory' and hops_to_prediction = 0")
    picture = parse(drilldown.draw(con, a["annotation_id"], tmp_path)[0])
    inputs, outputs = op_ends(warehouse, a)
    check_op(picture, a, inputs, outputs)
    assert picture["path_edges"] == []
    assert picture["nodes"][a["prediction"]] == {"target"}
    assert any("the operation produced it" in t for t in picture["texts"])


def test_fault_that_does_not_reach_the_prediction(warehouse, con, tmp_path: Path) -> None:
    a = annotation(warehouse, "graph_kind = 'memory' and faulty_op_id is not null and prediction_node_id is not null "
                              "and hops_to_prediction is null")
    picture = parse(drilldown.draw(con, a["annotation_id"], tmp_path)[0])
    inputs, outputs = op_ends(warehouse, a)
    check_op(picture, a, inputs, outputs)
    assert picture["path_edges"] == []
    assert any("is not downstream of the operation's outputs" in t for t in picture["texts"])


def test_label_without_an_operation(warehouse, con, tmp_path: Path) -> None:
    a = annotation(warehouse, "faulty_op_id is null")
    picture = parse(drilldown.draw(con, a["annotation_id"], tmp_path)[0])
    assert picture["op_edges"] == [] and picture["path_edges"] == []
    assert any("names no faulty operation" in t for t in picture["texts"])


def test_long_paths_keep_their_ends(warehouse, con, tmp_path: Path, monkeypatch) -> None:
    a = annotation(warehouse, "graph_kind = 'memory' and hops_to_prediction >= 4")
    full = drilldown.load(con, a["annotation_id"])
    monkeypatch.setattr(drilldown.layout, "MAX_PATH", 2)
    picture = parse(drilldown.draw(con, a["annotation_id"], tmp_path)[0])
    assert picture["elided"] == 1
    shown = [n.full_node_id for n in full.path[1:2] + full.path[-1:]]
    assert {n for n, roles in picture["nodes"].items() if roles & {"path", "target"}} == set(shown)
    # one real edge to the first kept node; the stretch after it is one dashed arrow
    assert picture["path_edges"] == [(full.path[0].full_node_id, shown[0], full.path_edges[0][2])]


def test_multi_agent_picture_runs_on_to_the_last_step_and_is_inert(warehouse, con, tmp_path: Path) -> None:
    a = annotation(warehouse, "annotation_id = ?", [warehouse["multi_id"]])
    assert a["prediction"] is None
    svg, _ = drilldown.draw(con, a["annotation_id"], tmp_path)
    picture = parse(svg)
    inputs, outputs = op_ends(warehouse, a)
    check_op(picture, a, inputs, outputs)
    last = query(
        warehouse["path"],
        "select e.target_full_node_id from edges e join operations o using (graph_id, op_id) "
        "where e.graph_id = ? order by o.step desc limit 1", [a["graph_id"]],
    )[0][0]
    steps_after = query(warehouse["path"], "select steps_after_decisive from failure_propagation "
                        "where annotation_id = ?", [a["annotation_id"]])[0][0]
    check_path(warehouse, picture, a, outputs, last, steps_after)
    # markup from the trace is text: no element but the drawing ones, no event handler, no link
    tags = {el.tag.removeprefix(SVG) for el in picture["root"].iter()}
    assert tags <= {"svg", "style", "defs", "marker", "path", "rect", "g", "text", "title"}
    names = [name.lower() for el in picture["root"].iter() for name in el.attrib]
    assert not any(name.startswith("on") or "href" in name for name in names)
    assert any(EVIL_AGENT in t for t in picture["texts"]) and any(PAYLOAD in t for t in picture["texts"])


def test_file_names_are_hashes_inside_the_output_folder(warehouse, con, tmp_path: Path) -> None:
    out = tmp_path / "out"
    svg, png = drilldown.draw(con, warehouse["multi_id"], out)  # the id holds '../../x'-like text
    assert warehouse["multi_id"].count("..") == 2
    assert svg.parent == out and png.parent == out
    assert re.fullmatch(r"annotation-[0-9a-f]{24}\.svg", svg.name) and png.name == svg.name[:-4] + ".png"
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == sorted([svg.name, png.name])
    for hostile in ("../../x", "/etc/passwd", "a/b\\c\x00d", "whowhen:Hand-Crafted/1#a0"):
        assert re.fullmatch(r"annotation-[0-9a-f]{24}", drilldown.picture_stem(hostile))
    with pytest.raises(drilldown.AnnotationNotFound):
        drilldown.draw(con, "../../nothing", tmp_path / "none")
    assert not (tmp_path / "none").exists()


def test_cli_show(warehouse, tmp_path: Path, capsys) -> None:
    from pipelines.interfaces.cli import main

    a = annotation(warehouse, "graph_kind = 'memory' and hops_to_prediction = 1")
    assert main(["show", a["annotation_id"], "--warehouse", str(warehouse["path"]), "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out.split()
    stem = drilldown.picture_stem(a["annotation_id"])
    view = f"failure-{stem.removeprefix('annotation-')}.html"
    assert printed == [str(tmp_path / view), str(tmp_path / f"{stem}.svg"), str(tmp_path / f"{stem}.png")]
    assert all(Path(p).is_file() for p in printed)
    page = (tmp_path / view).read_text()  # the view links the pictures beside it
    assert f'href="{stem}.svg"' in page and f'href="{stem}.png"' in page
    assert main(["show", "no-such-annotation", "--warehouse", str(warehouse["path"])]) == 1
    assert "no annotation 'no-such-annotation'" in capsys.readouterr().err
    # default folder: dashboards/show in the warehouse (builds never delete it)
    assert main(["show", a["annotation_id"], "--warehouse", str(warehouse["path"])]) == 0
    default = drilldown.show_dir(Warehouse(warehouse["path"]))
    printed = capsys.readouterr().out.split()
    assert printed == [str(default / view), str(default / f"{stem}.svg"), str(default / f"{stem}.png")]
    for path in printed:
        Path(path).unlink()


def drawn(manifest: dict) -> dict[str, str]:
    """The annotations that have a picture, and its file stem."""
    return {a: e["stem"] for a, e in manifest["pictures"].items() if e["svg"]}


def picture_files(manifest: dict) -> list[str]:
    return [f for f in manifest["files"] if f.startswith("dashboards/drilldown/")]


def test_draw_all_keeps_the_limit_and_skips_unchanged(warehouse) -> None:
    from dashboards import failure_view

    wh = Warehouse(warehouse["path"])
    total = query(warehouse["path"], "select count(*) from annotations")[0][0]
    with db.connect(wh) as connection:
        svg_only = failure_view.draw_all(wh, connection, limit=9)  # --pictures svg
        assert svg_only["drawn"] == 9 and svg_only["rendered"] == 9 and svg_only["converted"] == 0
        assert not svg_only["png"] and len(picture_files(svg_only)) == 9
        assert all(f.endswith(".svg") and (wh.root / f).is_file() for f in picture_files(svg_only))
        # every annotation has its failure view, drawn or not
        assert svg_only["views"] == total == len([f for f in svg_only["files"] if f.endswith(".html")])
        first = failure_view.draw_all(wh, connection, limit=9, png=True, workers=2)  # 9 PNGs: over 2 processes
        assert first["drawn"] == 9 and first["converted"] == 9 and first["rendered"] == 0 and not first["failed"]
        assert drawn(first) == drawn(svg_only)
        folder = wh.dashboards_dir / "drilldown"
        assert all((wh.root / f).is_file() for f in first["files"]) and len(picture_files(first)) == 18
        systems = query(warehouse["path"], "select system from failure_propagation where annotation_id in "
                        "(select unnest(?))", [list(drawn(first))])
        assert len({s for (s,) in systems}) == 5  # round-robin: the four memory systems and captainagent
        again = failure_view.draw_all(wh, connection, limit=9, png=True)  # nothing changed: nothing is drawn
        assert again["converted"] == 0 and again["rendered"] == 0 and again["written"] == 0
        assert again["pictures"] == first["pictures"]
        stem = next(iter(drawn(first).values()))
        (folder / f"{stem}.png").unlink()  # a lost file: drawn again, and only that one
        repaired = failure_view.draw_all(wh, connection, limit=9, png=True)
        assert repaired["converted"] == 1 and repaired["rendered"] == 0 and repaired["pictures"] == first["pictures"]
        (folder / f"{stem}.svg").unlink()
        repaired = failure_view.draw_all(wh, connection, limit=9, png=True)
        assert repaired["rendered"] == 1 and repaired["converted"] == 0
        fewer = failure_view.draw_all(wh, connection, limit=3, png=True)
    assert fewer["drawn"] == 3 and set(picture_files(fewer)) < set(picture_files(first))


def test_a_build_draws_the_same_pictures_as_one_annotation_at_a_time(warehouse, con) -> None:
    """Loaded with every annotation of the build (a build's failure views) or alone (`tracehouse
    show`, drilldown.load), an annotation's picture is the same."""
    from dashboards.drilldown import query as drilldown_query

    ids = [r[0] for r in con.execute("select annotation_id from annotations order by all").fetchall()]
    data = drilldown_query.load_failures(con, paths_for=ids)
    assert {r["graph_kind"] for r in data.rows} == {"memory", "multi_agent"} and len(data.rows) == len(ids)
    for row in data.rows:
        one = drilldown.load(con, row["annotation_id"], row["graph_id"])
        batched = drilldown_query.drilldown(data, row)
        assert drilldown.render_svg(batched) == drilldown.render_svg(one), row["annotation_id"]
