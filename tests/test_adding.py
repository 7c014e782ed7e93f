"""Adding a mart, a chart or a source kind touches only its own files (README.md, "Extending"): each is
added once to a copy of the repository, and that copy picks it up end to end (the catalog, the derived
lineage, the mart's unit test, the chart registry, the readers' registry, the CLI's help, the config) and
passes its docs tests, with no other file changed. A doc that listed every mart, chart or kind, or
counted them, would fail the copy's docs tests here."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import REPO

MART, CHART, KIND = "toy_graphs_per_system", "toy_graphs_chart", "toy_whowhen"

NEW_FILES = {
    f"sql/marts/{MART}.sql": "-- graphs per system\nselect system, count(*)::bigint as n from graphs group by system\n",
    f"sql/charts/{CHART}.sql": f"-- graphs per system, drawn\nselect system, n from {MART} order by system\n",
    f"pipelines/readers/{KIND}.py": textwrap.dedent(f'''\
        """Reader for a toy kind: a Who&When folder, read as the whowhen reader reads it."""

        from pipelines.readers.whowhen import discover, read

        kind = "{KIND}"
        __all__ = ["discover", "kind", "read"]
        '''),
}
MART_ENTRY = textwrap.indent(textwrap.dedent(f"""\
      - name: {MART}
        description: Graphs per system.
        grain: [system]
        columns:
          - {{name: system, description: the system, tests: [not_null]}}
          - {{name: n, description: graphs}}
        unit_tests:
          - name: counts_graphs
            given:
              graphs: [{{graph_id: g1, system: rag}}, {{graph_id: g2, system: rag}}, {{graph_id: g3, system: mem0}}]
            expect:
              - {{system: rag, n: 2}}
              - {{system: mem0, n: 1}}
    """), "  ")
CHART_ENTRY = textwrap.indent(textwrap.dedent(f"""\

      - name: {CHART}
        title: Graphs per system
        description: >-
          Graphs per system ({MART}).
        empty: >-
          No graph is loaded.
    """), "  ")
DRAWING = textwrap.dedent(f'''\
    @chart("{CHART}")
    def {CHART}(rows: list[dict]) -> alt.TopLevelMixin:
        import altair as alt

        return alt.Chart(data(rows)).mark_bar().encode(x=alt.X("system:N"), y=alt.Y("n:Q"))


    ''')
REGISTERED = "CHARTS: dict[str, ChartDef] = load_charts(BUILDERS)"
GRAPH_KINDS = re.compile(r"^GRAPH_KINDS: tuple\[str, \.\.\.\] = \(", re.M)

# What the copy is asked, in a process of its own (its modules, not this process's).
PROBE = textwrap.dedent(f"""\
    import contextlib, io, json, sys
    from pathlib import Path

    from dashboards import CHARTS
    from pipelines import config, readers
    from pipelines.analytics import catalog, mart_units
    from pipelines.defs import analytics
    from pipelines.interfaces.cli import make_parser
    from pipelines.readers.base import GraphRows

    mart = catalog.marts()["{MART}"]
    [spec] = analytics.marts_asset(["{MART}"]).specs
    units = mart_units.run_all("{MART}")
    chart = CHARTS["{CHART}"]
    spec_of_chart = chart.build([{{"system": "rag", "n": 2}}]).to_dict()
    build_help = io.StringIO()
    with contextlib.redirect_stdout(build_help), contextlib.suppress(SystemExit):
        make_parser().parse_args(["build", "--help"])
    reader = readers.reader_for("{KIND}")
    files = reader.discover(Path(sys.argv[1]), "{KIND}")
    graphs = [item for item in reader.read(files[0]) if isinstance(item, GraphRows)]
    source = config.parse_source("toys:{KIND}=" + sys.argv[1])
    Path("tracehouse.toml").write_text('[[sources]]\\nkind = "{KIND}"\\npath = "' + sys.argv[1] + '"\\n')
    settings = config.load_settings("warehouse", config="tracehouse.toml")
    print(json.dumps({{
        "mart_reads": list(mart.reads),
        "mart_upstream": sorted(d.asset_key.to_user_string() for d in spec.deps),
        "mart_order": "{MART}" in catalog.mart_order(),
        "units": [[r.name, r.passed, r.message] for r in units],
        "chart_reads": list(chart.reads),
        "chart_title": chart.title,
        "chart_mark": spec_of_chart.get("mark"),
        "kind_tier": readers.tier("{KIND}"),
        "in_build_help": "{KIND}" in " ".join(build_help.getvalue().split()),
        "in_unknown_kind": "{KIND}" in readers.unknown_kind("nosuchkind"),
        "graphs_read": len(graphs),
        "cli_source_kind": source.kind,
        "toml_source_kinds": [s.kind for s in settings.sources],
    }}))
""")


def repository_files() -> list[str]:
    """The repository's files as they are now: tracked ones and new ones git does not ignore."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    return [name for name in listed if name and (REPO / name).is_file()]


def digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def add_one_of_each(copy: Path) -> None:
    """A mart, a chart and a source kind, as docs/MARTS.md, docs/DASHBOARD.md and docs/SOURCES.md say."""
    for path, text in NEW_FILES.items():
        (copy / path).write_text(text)
    with (copy / "sql/marts/_marts.yml").open("a") as marts:
        marts.write(MART_ENTRY)
    with (copy / "sql/charts/_charts.yml").open("a") as charts:
        charts.write(CHART_ENTRY)
    drawings = copy / "dashboards/charts.py"
    assert drawings.read_text().count(REGISTERED) == 1, "dashboards/charts.py registers its charts elsewhere now"
    drawings.write_text(drawings.read_text().replace(REGISTERED, DRAWING + REGISTERED))
    registry = copy / "pipelines/readers/__init__.py"
    assert len(GRAPH_KINDS.findall(registry.read_text())) == 1, "pipelines/readers/__init__.py lists kinds elsewhere"
    registry.write_text(GRAPH_KINDS.sub(f'GRAPH_KINDS: tuple[str, ...] = ("{KIND}", ', registry.read_text()))


def run_in(copy: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(copy), "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "TRACEHOUSE_CONFIG": str(tmp_path / "no-such.toml"), "GX_ANALYTICS_ENABLED": "false"}
    return subprocess.run([sys.executable, *args], cwd=copy, env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def added(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[str]]:
    """A copy of the repository with one mart, one chart and one source kind added, and the files that changed."""
    copy = tmp_path_factory.mktemp("adding") / "repo"
    for name in repository_files():
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, copy / name)
    before = digests(copy)
    add_one_of_each(copy)
    after = digests(copy)
    return copy, {path for path in before.keys() | after.keys() if before.get(path) != after.get(path)}


def test_each_addition_is_its_own_files(added: tuple[Path, set[str]]) -> None:
    _, changed = added
    assert changed == {*NEW_FILES, "sql/marts/_marts.yml", "sql/charts/_charts.yml", "dashboards/charts.py",
                       "pipelines/readers/__init__.py"}
    assert len([p for p in changed if "marts" in p]) == 2  # a mart: its SQL file and its YAML entry
    assert len([p for p in changed if "chart" in p]) == 3  # a chart: its SQL, its YAML, its drawing
    assert len([p for p in changed if "readers" in p]) == 2  # a kind: its module, its registration


def test_the_copy_picks_each_addition_up(added: tuple[Path, set[str]], tmp_path: Path) -> None:
    copy, _ = added
    result = run_in(copy, tmp_path, "-c", PROBE, str(REPO / "tests/fixtures/whowhen"))
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["mart_reads"] == found["mart_upstream"] == ["graphs"]  # lineage derived from its SQL
    assert found["mart_order"]
    assert found["units"] == [["counts_graphs", True, found["units"][0][2]]], found["units"]
    assert found["chart_reads"] == [MART] and found["chart_title"] == "Graphs per system"
    assert found["chart_mark"] in ("bar", {"type": "bar"})
    assert found["kind_tier"] == 0 and found["in_build_help"] and found["in_unknown_kind"]
    assert found["graphs_read"] == 1
    assert found["cli_source_kind"] == KIND and found["toml_source_kinds"] == [KIND]


def test_the_copys_docs_tests_pass_without_a_doc_edit(added: tuple[Path, set[str]], tmp_path: Path) -> None:
    copy, _ = added
    result = run_in(copy, tmp_path, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_docs.py",
                    "tests/test_table_docs.py")
    assert result.returncode == 0, result.stdout[-4000:]
    assert re.search(r"\b\d+ passed\b", result.stdout) and " failed" not in result.stdout, result.stdout[-2000:]
