"""Every committed build as Apache Iceberg snapshots (pipelines/storage/iceberg.py, docs/SCALE.md), read back with
plain pyiceberg and compared with what `tracehouse sql` reads, across builds, an interrupted publication
and garbage collection."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pgserver
import pyarrow as pa
import pytest
from builds import add_node, rows, warehouse_rows
from conftest import build_warehouse

from pipelines import schema
from pipelines.builds import commit
from pipelines.interfaces.cli import main
from pipelines.storage import iceberg
from pipelines.storage.state import CommitLog
from pipelines.storage.warehouse import Warehouse, field_id, with_field_ids, write_parquet_atomic


def plain_catalog(warehouse: Path) -> Any:
    """The catalog as any pyiceberg user opens it: no tracehouse code."""
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog("tracehouse", uri=f"sqlite:///{warehouse / 'iceberg' / 'catalog.db'}")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`tracehouse build --iceberg` (build 1), then build 2 after one source file changed (Iceberg stays on)."""
    from pipelines.sample.corpus import generate_corpus
    from pipelines.sample.predictions import simulate_predictions

    root = tmp_path_factory.mktemp("iceberg")
    corpus, predictions, warehouse = root / "corpus", root / "predictions", root / "W"
    generate_corpus(corpus, seed=2, graphs_per_split=2)
    simulate_predictions(corpus, predictions, seed=2)
    sources = [f"sample:memtracebench={corpus}", f"careful:memtrace_attribution={predictions / 'simulated-careful'}"]
    flags = [arg for source in sources for arg in ("--source", source)]
    assert main(["build", *flags, "--warehouse", str(warehouse), "--iceberg", "--quiet"]) == 0
    assert iceberg.enabled(Warehouse(warehouse)) and iceberg.published(Warehouse(warehouse), 1)
    build1 = warehouse_rows(warehouse)
    add_node(corpus, "rag", "U9:extra")
    second = build_warehouse(warehouse, sources)
    assert second.ok and second.build == 2, second
    return {"warehouse": warehouse, "corpus": corpus, "sources": sources, "build1": build1}


def test_every_table_and_mart_reads_the_same_rows_from_iceberg(built: dict[str, Any]) -> None:
    warehouse = built["warehouse"]
    expected = warehouse_rows(warehouse)
    catalog = plain_catalog(warehouse)
    assert {name for _, name in catalog.list_tables("tracehouse")} == set(expected)
    for name, want in expected.items():
        table = catalog.load_table(f"tracehouse.{name}")
        assert rows(table.scan().to_arrow()) == want, name
        assert table.current_snapshot().summary["tracehouse.build"] == "2"
    assert all(expected[name] for name in ("graphs", "nodes", "attributions", "failure_rates"))  # rows compared
    # canonical schemas, with field ids; required columns stay required
    nodes = catalog.load_table("tracehouse.nodes").schema()
    assert [f.name for f in nodes.fields] == schema.NODES.names
    assert nodes.find_field("graph_id").required and nodes.find_field("graph_id").field_id == field_id("graph_id")
    assert not nodes.find_field("value").required


def parquet_field_ids(path: Path) -> dict[str, int]:
    """Column path (``golden_answers.element`` for a list's element) -> the Parquet field id in the file."""
    import pyarrow.parquet as pq

    found: dict[str, int] = {}

    def walk(fields: list[pa.Field], prefix: str) -> None:
        for f in fields:
            found[prefix + f.name] = int(f.metadata[b"PARQUET:field_id"])
            if pa.types.is_list(f.type) or pa.types.is_large_list(f.type):
                walk([f.type.value_field.with_name("element")], f"{prefix}{f.name}.")

    walk(list(pq.read_schema(path)), "")
    return found


def test_data_files_carry_the_field_ids_of_their_iceberg_table(built: dict[str, Any]) -> None:
    """Every data file of every table's snapshot is a Parquet file whose columns (nested ones too)
    carry the ids of the table's current schema, which is how Iceberg readers find columns."""
    catalog = plain_catalog(built["warehouse"])
    for _, name in catalog.list_tables("tracehouse"):
        table = catalog.load_table(f"tracehouse.{name}")
        expected = {table.schema().find_column_name(i): i for i in table.schema().field_ids}
        files = table.inspect.files().column("file_path").to_pylist()  # empty files too (ingest_errors)
        assert files, name
        for path in files:
            found = parquet_field_ids(Path(path.removeprefix("file://")))
            assert found == expected, (name, path)


def test_no_two_columns_of_a_table_share_a_field_id() -> None:
    """Field ids follow from names (storage.field_id): check every table and mart for a collision."""
    from pipelines.analytics import catalog as sql_catalog

    schemas = dict(schema.TABLES)
    for mart in sql_catalog.marts().values():
        schemas[mart.name] = pa.schema([(column, pa.string()) for column in mart.columns])
    for name, arrow_schema in schemas.items():
        ids = []
        for f in with_field_ids(arrow_schema):
            ids.append(int(f.metadata[b"PARQUET:field_id"]))
            if pa.types.is_list(f.type):
                ids.append(int(f.type.value_field.metadata[b"PARQUET:field_id"]))
        assert len(ids) == len(set(ids)), name


def test_the_snapshot_tagged_build_1_still_reads_the_first_build(built: dict[str, Any]) -> None:
    warehouse, build1 = built["warehouse"], built["build1"]
    build2 = warehouse_rows(warehouse)
    assert build1["nodes"] != build2["nodes"] and len(build2["nodes"]) == len(build1["nodes"]) + 1
    catalog = plain_catalog(warehouse)
    ids = json.loads((warehouse / "iceberg" / "builds" / "00000001.json").read_text())["tables"]
    assert set(ids) == set(build1)
    for name, want in build1.items():
        table = catalog.load_table(f"tracehouse.{name}")
        assert rows(table.scan().use_ref("build-1").to_arrow()) == want, name
        assert rows(table.scan(snapshot_id=ids[name]).to_arrow()) == want, name
        assert table.snapshot_by_name("build-1").summary["tracehouse.build"] == "1"
        assert rows(table.scan().use_ref("build-2").to_arrow()) == build2[name], name


def test_sql_reads_an_earlier_kept_build(built: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    warehouse = str(built["warehouse"])
    query = "select (select count(*) from nodes) as nodes, (select build from tracehouse_build) as build"
    n1 = len(built["build1"]["nodes"])
    assert main(["sql", "--warehouse", warehouse, "--build", "1", "--format", "csv", query]) == 0
    assert capsys.readouterr().out.split() == ["nodes,build", f"{n1},1"]
    assert main(["sql", "--warehouse", warehouse, "--format", "csv", query]) == 0
    assert capsys.readouterr().out.split() == ["nodes,build", f"{n1 + 1},2"]
    assert main(["sql", "--warehouse", warehouse, "--build", "7", "select 1"]) == 1
    assert "builds kept: 1, 2" in capsys.readouterr().err


def test_an_interrupted_publication_is_completed_and_old_snapshots_expire_with_their_files(
        built: dict[str, Any]) -> None:
    warehouse, corpus, sources = built["warehouse"], built["corpus"], built["sources"]
    wh = Warehouse(warehouse)
    # build 3 commits without Iceberg, then its publication stops half-way (as a kill would leave it)
    iceberg.set_enabled(wh, False)
    add_node(corpus, "mem0", "U9:extra")
    third = build_warehouse(warehouse, sources)
    assert third.ok and third.build == 3, third
    iceberg.set_enabled(wh, True)
    record = CommitLog(wh).get(3)
    tables = iceberg.build_tables(wh, record)
    names = sorted(tables)
    half = names[: len(names) // 2]
    catalog = iceberg.open_catalog(wh)
    for name in half:
        iceberg.publish_table(catalog, name, *tables[name], build=3, kept={1, 2, 3})
    assert iceberg.published(wh, 3) is None
    build2, build3 = warehouse_rows(warehouse, build=2), warehouse_rows(warehouse, build=3)
    reader = plain_catalog(warehouse)
    for name in names:  # each table whole, at the new build or at the previous one
        current = rows(reader.load_table(f"tracehouse.{name}").scan().to_arrow())
        assert current == (build3 if name in half else build2)[name], name

    # the next build completes build 3 first (catch-up), then publishes its own and expires build 1
    add_node(corpus, "evermemos", "U9:extra")
    fourth = build_warehouse(warehouse, sources)
    assert fourth.ok and fourth.build == 4, fourth
    assert [p.stem for p in sorted((warehouse / "iceberg" / "builds").glob("*.json"))] == [
        "00000002", "00000003", "00000004"]
    build4 = warehouse_rows(warehouse)
    reader = plain_catalog(warehouse)
    for name in names:
        table = reader.load_table(f"tracehouse.{name}")
        assert set(table.metadata.refs) == {"main", "build-2", "build-3", "build-4"}, name
        assert len(table.metadata.snapshots) == 3, name
        assert rows(table.scan().use_ref("build-3").to_arrow()) == build3[name], name
        assert rows(table.scan().to_arrow()) == build4[name], name
        for snapshot in table.metadata.snapshots:  # garbage collection kept every file a snapshot names
            for task in table.scan(snapshot_id=snapshot.snapshot_id).plan_files():
                assert Path(task.file.file_path).is_file(), task.file.file_path
        metadata_files = {p.name for p in (Path(table.location()) / "metadata").glob("*.avro")}
        assert len(metadata_files) <= 3 * 4, name  # per kept snapshot: a manifest list and up to 3 manifests
    ids = iceberg.snapshot_ids(wh, 3)
    assert rows(reader.load_table("tracehouse.nodes").scan(snapshot_id=ids["nodes"]).to_arrow()) == build3["nodes"]

    # publishing again changes nothing
    before = {name: reader.load_table(f"tracehouse.{name}").metadata_location for name in names}
    commit.catch_up(wh)
    assert iceberg.publish(wh, CommitLog(wh).get(4)) == iceberg.snapshot_ids(wh, 4)
    after = {name: plain_catalog(warehouse).load_table(f"tracehouse.{name}").metadata_location for name in names}
    assert before == after


def test_tracehouse_toml_turns_iceberg_on_and_off(tmp_path: Path) -> None:
    from pipelines.config import ConfigError, load_settings

    config = tmp_path / "tracehouse.toml"
    for text, expected in (("", None), ("[iceberg]\nenabled = true\n", True), ("[iceberg]\nenabled = false\n", False)):
        config.write_text(text)
        assert load_settings(str(tmp_path / "W"), None, str(config)).iceberg is expected
    for text in ("[iceberg]\nenabled = 'yes'\n", "[iceberg]\nenable = true\n", "iceberg = true\n"):
        config.write_text(text)
        with pytest.raises(ConfigError, match="iceberg|enable"):
            load_settings(str(tmp_path / "W"), None, str(config))
    wh = Warehouse(tmp_path / "W")
    assert not iceberg.enabled(wh)
    iceberg.set_enabled(wh, True)
    assert iceberg.enabled(wh)
    iceberg.set_enabled(wh, False)
    assert not iceberg.enabled(wh)


def test_a_changed_table_keeps_its_column_ids_and_earlier_builds_stay_readable(tmp_path: Path) -> None:
    """A mart that drops one column and gains another gets a new schema version in which the kept
    column has its old id; the snapshot of the earlier build still reads with the columns it had.
    A column whose type changed makes the table anew (no Iceberg schema change does that)."""
    warehouse = Warehouse(tmp_path)
    versions = [
        pa.table({"system": ["rag", "mem0"], "n": pa.array([3, 4], pa.int64())}),
        pa.table({"system": ["rag"], "share": [0.5]}),
        pa.table({"system": pa.array([7], pa.int64()), "share": [0.25]}),
    ]
    catalog = iceberg.open_catalog(warehouse)
    try:
        for build, data in enumerate(versions, start=1):
            path = write_parquet_atomic(data, tmp_path / f"mart-{build}.parquet")
            iceberg.publish_table(catalog, "mart", data.schema, [str(path)], build, {1, 2, 3})
            table = catalog.load_table("tracehouse.mart")
            assert table.scan().to_arrow().to_pylist() == data.to_pylist(), build
            assert table.schema().find_field("system").field_id == field_id("system")
            if build == 2:
                first = table.scan(snapshot_id=table.metadata.refs["build-1"].snapshot_id).to_arrow()
                assert first.to_pylist() == versions[0].to_pylist()
                assert [s.schema_id for s in table.metadata.schemas][-1] == table.metadata.current_schema_id
        assert "build-1" not in table.metadata.refs  # made anew at build 3: system became an integer
    finally:
        catalog.close()


@pytest.mark.slow
@pytest.mark.skipif(pgserver.available() is not None, reason=f"no PostgreSQL server: {pgserver.available()}")
def test_two_warehouses_share_one_postgresql_catalog_in_namespaces_of_their_own(tmp_path: Path) -> None:
    """[iceberg] catalog = a PostgreSQL URL (a server the test starts on 127.0.0.1), namespace of each
    warehouse's own: plain pyiceberg reads each warehouse's rows from its namespace, and the second
    warehouse's publication leaves the first one's tables alone."""
    from pyiceberg.catalog.sql import SqlCatalog

    from pipelines.sample.corpus import generate_corpus

    corpus = tmp_path / "corpus"
    generate_corpus(corpus, seed=3, graphs_per_split=1)
    with pgserver.PostgresServer() as server:
        expected = {}
        for team in ("team_a", "team_b"):
            config = tmp_path / f"{team}.toml"
            config.write_text(f'[iceberg]\nenabled = true\ncatalog = "{server.url}"\nnamespace = "{team}"\n')
            warehouse = tmp_path / team
            assert main(["build", "--config", str(config), "--warehouse", str(warehouse), "--source",
                         f"memtracebench={corpus}", "--quiet"]) == 0
            assert not (warehouse / "iceberg" / "catalog.db").exists()
            assert iceberg.published(Warehouse(warehouse), 1)["catalog"] == server.url
            expected[team] = warehouse_rows(warehouse)
        catalog = SqlCatalog("tracehouse", uri=server.url)
        try:
            for team, want in expected.items():
                assert {name for _, name in catalog.list_tables(team)} == set(want)
                for name in ("graphs", "nodes", "annotations", "failure_rates"):
                    assert rows(catalog.load_table(f"{team}.{name}").scan().to_arrow()) == want[name], (team, name)
        finally:
            catalog.engine.dispose()


def test_a_build_whose_catalog_cannot_be_reached_is_committed_and_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The commit comes first: a catalog that does not answer fails the publication (exit 4: committed,
    publishing unfinished; the catalog named with its password hidden), the build stands committed, and
    the next build tries the publication again before anything else."""
    from pipelines.sample.corpus import generate_corpus

    corpus = tmp_path / "corpus"
    generate_corpus(corpus, seed=4, graphs_per_split=1)
    config = tmp_path / "tracehouse.toml"
    config.write_text('[iceberg]\nenabled = true\ncatalog = "postgresql://nobody:secret@127.0.0.1:1/none"\n'
                      'namespace = "team_a"\n')  # a bare postgresql:// means psycopg2, which is installed
    args = ["build", "--config", str(config), "--warehouse", str(tmp_path / "w"), "--source", f"memtracebench={corpus}"]
    assert main(args) == 4
    said = "".join(capsys.readouterr())
    assert "Iceberg catalog postgresql+psycopg2://nobody:***@127.0.0.1:1/none" in said and "secret" not in said
    assert "build 1 committed in" in said and "but publishing its copies did not finish" in said
    assert CommitLog(Warehouse(tmp_path / "w")).latest().build == 1
    assert main(args) == 1
    assert "Iceberg catalog postgresql+psycopg2://nobody:***@127.0.0.1:1/none" in "".join(capsys.readouterr())
    assert iceberg.namespace(Warehouse(tmp_path / "w")) == "team_a"


def test_metadata_stays_bounded_over_many_builds_and_kept_builds_stay_tagged(tmp_path: Path) -> None:
    """Every build replaces one of a table's files (an overwrite through pyiceberg's public API, which
    keeps adding manifests): the table is made anew from the kept builds whenever its current snapshot
    reaches MANIFEST_LIMIT manifests, so over many builds its manifests and metadata files stay bounded,
    each kept build's tag reads that build's rows and the current snapshot the last build's."""
    warehouse = Warehouse(tmp_path)
    data_schema = pa.schema([("graph_id", pa.string()), ("build", pa.int64())])

    def data_file(slot: int, build: int) -> str:
        rows = pa.table({"graph_id": [f"g{slot}"], "build": pa.array([build], pa.int64())}, schema=data_schema)
        return str(write_parquet_atomic(rows, tmp_path / f"slot{slot}-build{build}.parquet"))

    files = [data_file(slot, 0) for slot in range(4)]
    history: dict[int, list[str]] = {}
    most_manifests = 0
    catalog = iceberg.open_catalog(warehouse)
    try:
        for build in range(1, 3 * iceberg.MANIFEST_LIMIT + 2):
            files[build % 4] = data_file(build % 4, build)
            history[build] = list(files)
            kept = set(range(max(1, build - 2), build + 1))
            iceberg.publish_table(catalog, "mart", data_schema, files, build, kept, earlier=history.get)
            table = catalog.load_table("tracehouse.mart")
            most_manifests = max(most_manifests, len(table.current_snapshot().manifests(table.io)))
            assert set(table.metadata.refs) == {"main", *(f"build-{n}" for n in kept)}, build
            for number in kept:
                snapshot_id = table.metadata.refs[f"build-{number}"].snapshot_id
                assert sorted(r["build"] for r in table.scan(snapshot_id=snapshot_id).to_arrow().to_pylist()) == sorted(
                    pq_build(path) for path in history[number]), (build, number)
        metadata = Path(table.location()) / "metadata"
        assert most_manifests <= iceberg.MANIFEST_LIMIT
        assert len(list(metadata.glob("*.avro"))) <= 3 * (iceberg.MANIFEST_LIMIT + 1)
        assert len(list(metadata.glob("*.metadata.json"))) <= 2
    finally:
        catalog.close()


def pq_build(path: str) -> int:
    """The build a test data file was written for (its name says so)."""
    return int(Path(path).stem.rsplit("build", 1)[1])
