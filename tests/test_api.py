"""The Python API (``tracehouse.open``, docs/PYTHON.md) over real builds, and the one-line error a
command gives when an extra it needs is not installed (pipelines/extras.py)."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import orjson
import polars as pl
import pytest
from conftest import REPO, build_warehouse
from polars.testing import assert_frame_equal
from smartcomment_graphs import make_graph, write_memtracebench

import tracehouse
from pipelines import schema
from pipelines.analytics import db
from pipelines.extras import EXTRAS, missing_extra_message
from pipelines.storage.warehouse import Warehouse


def annotation_rows(frame: pl.DataFrame) -> list[tuple]:
    return frame.sort("graph_id", "annotation_id").rows()


@pytest.fixture(scope="module")
def notebook(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """What a notebook does: build, open the warehouse, read `annotations` through Polars, then a new
    build is committed (one more graph) while the notebook still holds its handle."""
    root = tmp_path_factory.mktemp("api")
    corpus, warehouse = root / "corpus", root / "warehouse"
    write_memtracebench(corpus, {"rag": 2, "mem0": 2})
    assert build_warehouse(warehouse, [f"memtracebench={corpus}"]).ok
    first = tracehouse.open(warehouse)
    lazy = first.table("annotations")  # made before the next commit, collected after it
    rows_before = annotation_rows(lazy.collect())
    (corpus / "rag" / "realmem_realmem-9.json").write_bytes(
        orjson.dumps(make_graph("graph-added", "realmem-9", "NaiveRAG", seed=9, queries=4)))
    assert build_warehouse(warehouse, [f"memtracebench={corpus}"]).ok
    yield {"warehouse": warehouse, "first": first, "lazy": lazy, "rows_before": rows_before}
    first.close()


def test_a_notebook_keeps_reading_the_build_it_opened(notebook: dict) -> None:
    first, rows_before = notebook["first"], notebook["rows_before"]
    assert first.build == 1 and rows_before
    assert annotation_rows(notebook["lazy"].collect()) == rows_before
    assert annotation_rows(first.table("annotations").collect()) == rows_before
    assert first.sql("select count(*) from annotations").fetchall() == [(len(rows_before),)]
    assert first.kept()

    latest = tracehouse.open(notebook["warehouse"])
    added = latest.table("annotations").filter(pl.col("graph_id") == "graph-added").collect()
    assert latest.build == 2 and added.height > 0
    assert latest.table("annotations").collect().height == len(rows_before) + added.height
    assert first.table("annotations").filter(pl.col("graph_id") == "graph-added").collect().height == 0


def test_build_n_pins_an_earlier_kept_build(notebook: dict) -> None:
    with tracehouse.open(str(notebook["warehouse"]), build=1) as pinned:
        assert pinned.build == 1
        assert annotation_rows(pinned.table("annotations").collect()) == notebook["rows_before"]
        assert pinned.sql("select build from tracehouse_build").fetchall() == [(1,)]
        assert pinned.sql("select count(*) from graphs").fetchall() == [(4,)]
    with tracehouse.open(notebook["warehouse"], build=2) as pinned:
        assert pinned.sql("select count(*) from graphs").fetchall() == [(5,)]


def test_table_reads_every_table_and_mart_as_sql_does(notebook: dict) -> None:
    with tracehouse.open(notebook["warehouse"]) as build:
        assert build.names() == [*schema.TABLES, *sorted(db.mart_names())]
        for name in build.names():
            from_polars = build.table(name).collect()
            from_duckdb = build.sql(f'select * from "{name}"').pl()
            assert from_polars.columns == from_duckdb.columns, name
            assert from_polars.height == from_duckdb.height, name
            if from_polars.height:
                order = from_polars.columns[:4]
                assert_frame_equal(from_polars.sort(order), from_duckdb.sort(order), check_dtypes=False)
        modes = build.table("failure_modes_by_system").collect()
        assert modes.height > 0 and modes["n"].sum() == build.sql(
            "select sum(n) from failure_modes_by_system").fetchall()[0][0]
        with pytest.raises(KeyError, match="'input_files' is neither a table nor a mart.*use .sql"):
            build.table("input_files")


def test_sql_sees_the_marts_and_the_lineage_macros_as_the_cli_does(notebook: dict) -> None:
    warehouse = notebook["warehouse"]
    cli = db.connect(Warehouse(warehouse))
    try:
        with tracehouse.open(warehouse) as build:
            graph_id, op_id = build.sql(
                "select graph_id, faulty_op_id from annotations where faulty_op_id is not null "
                "order by graph_id, annotation_id limit 1").fetchall()[0]
            query = "select * from op_subgraph(?, ?) order by all"
            subgraph = build.sql(query, params=[graph_id, op_id])
            assert subgraph.fetchall() == cli.execute(query, [graph_id, op_id]).fetchall() != []
            node = subgraph.pl().filter(pl.col("role") == "output")["full_node_id"][0]
            upstream = "select * from upstream(?, ?) order by all"
            assert build.sql(upstream, params=[graph_id, node]).fetchall() == \
                cli.execute(upstream, [graph_id, node]).fetchall() != []
            rates = "select system, dataset, failure_rate from failure_rates order by all"
            assert build.sql(rates).fetchall() == cli.execute(rates).fetchall() != []
            assert build.sql(rates).df().shape[0] == build.sql(rates).arrow().read_all().num_rows > 0
    finally:
        cli.close()


def test_a_build_it_does_not_keep_or_a_missing_warehouse_is_named(notebook: dict, tmp_path: Path) -> None:
    with pytest.raises(tracehouse.BuildNotKept, match=r"build 7 is not one .* keeps .*builds kept: 1, 2$"):
        tracehouse.open(notebook["warehouse"], build=7)
    with pytest.raises(ValueError, match="build must be a build number .* got 0"):
        tracehouse.open(notebook["warehouse"], build=0)
    missing = tmp_path / "nowhere"
    for build in (None, 1):
        with pytest.raises(FileNotFoundError, match=f"no warehouse at {missing}.*run `tracehouse build` first"):
            tracehouse.open(missing, build=build)


def test_a_pinned_build_reads_until_three_newer_builds_are_committed(tmp_path: Path) -> None:
    corpus, warehouse = tmp_path / "corpus", tmp_path / "warehouse"
    write_memtracebench(corpus, {"rag": 1})
    assert build_warehouse(warehouse, [f"memtracebench={corpus}"]).ok
    pinned = tracehouse.open(warehouse)
    lazy = pinned.table("graphs")
    for newer in (1, 2, 3):
        (corpus / "rag" / "locomo_locomo-0.json").write_bytes(
            orjson.dumps(make_graph(f"graph-{newer}", "locomo-0", "NaiveRAG", seed=newer)))
        assert build_warehouse(warehouse, [f"memtracebench={corpus}"]).ok
        if newer < 3:  # builds 1..3 kept: the first one reads as it did
            assert pinned.kept() and lazy.collect()["graph_id"].to_list() == ["graph-rag-0000"]
    assert not pinned.kept()
    with pytest.raises(tracehouse.BuildNotKept, match=r"build 1 of .* was collected: .*builds kept: 2, 3, 4\)"):
        pinned.table("graphs")
    with pytest.raises(tracehouse.BuildNotKept, match="build 1 of .* was collected"):
        pinned.sql("select count(*) from graphs")
    with pytest.raises(FileNotFoundError, match="graphs.parquet"):  # its only partition changed in each build
        lazy.collect()
    assert tracehouse.open(warehouse).table("graphs").collect()["graph_id"].to_list() == ["graph-3"]
    pinned.close()


def test_import_tracehouse_works_from_any_folder(tmp_path: Path) -> None:
    """The installed package, not the repository's folder on the path: what a notebook elsewhere gets."""
    out = subprocess.run([sys.executable, "-c", "import tracehouse; print(tracehouse.open.__module__)"],
                         cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "pipelines.interfaces.api"


# -- a command that needs an extra that is not installed ---------------------------------------------

LEFT_OUT = {"dask": "dagster-dask", "s3": "obstore", "iceberg": "pyiceberg"}  # extra -> its distribution


def environment_without(folder: Path, distributions: list[str]) -> Path:
    """A virtual environment with every package of this one except ``distributions``: their files
    are left out, the rest linked. A real environment an extra was not installed in, made in a
    moment (a fresh `pip install -e .` takes minutes; its figures are in README.md)."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(folder)
    python = folder / "bin" / "python"
    target = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 capture_output=True, text=True, check=True).stdout.strip())
    left_out = {Path(str(f)).parts[0] for name in distributions for f in importlib.metadata.distribution(name).files}
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if entry.name not in left_out and entry.name != "__pycache__":
            (target / entry.name).symlink_to(entry)
    return python


def test_a_missing_extra_stops_the_command_with_one_line_naming_it(tmp_path: Path) -> None:
    python = environment_without(tmp_path / "env", list(LEFT_OUT.values()))
    present = subprocess.run([python, "-c", "import pipelines.interfaces.api, dagster, duckdb, polars; import obstore"],
                             capture_output=True, text=True)
    assert present.returncode == 1 and "No module named 'obstore'" in present.stderr  # the rest is there

    corpus, warehouse = tmp_path / "corpus", tmp_path / "warehouse"
    write_memtracebench(corpus, {"rag": 1})
    commands = {
        "dask": (["build", "--warehouse", str(warehouse), "--source", f"memtracebench={corpus}",
                  "--executor", "dask"], "--executor dask"),
        "iceberg": (["build", "--warehouse", str(warehouse), "--source", f"memtracebench={corpus}", "--iceberg"],
                    f"Iceberg publication of {warehouse}"),
        "s3": (["sql", "--warehouse", "s3://team/wh", "select 1"], "the object store s3://team/wh"),
    }
    for extra, (args, feature) in commands.items():
        run = subprocess.run([python, "-m", "pipelines.interfaces.cli",
                              *args], cwd=tmp_path, capture_output=True, text=True,
                             timeout=300)
        module = EXTRAS[extra][0]
        assert run.returncode == 2, (extra, run.stderr)
        assert run.stderr.strip().splitlines()[-1] == f"tracehouse: {missing_extra_message(feature, extra, module)}"
        assert f"pip install 'tracehouse[{extra}]'" in run.stderr and "Traceback" not in run.stderr
    assert not (warehouse / "builds").exists()  # nothing was built


def test_postgresql_without_the_postgres_extra_is_named_before_a_build(tmp_path: Path) -> None:
    """Dask and pyiceberg there, psycopg2 and dagster-postgres not: a PostgreSQL Iceberg catalog or
    Dagster instance is refused before the build starts, naming the extra."""
    python = environment_without(tmp_path / "env", ["psycopg2-binary", "dagster-postgres"])
    corpus, warehouse, home = tmp_path / "corpus", tmp_path / "warehouse", tmp_path / "dagster-home"
    write_memtracebench(corpus, {"rag": 1})
    home.mkdir()
    (home / "dagster.yaml").write_text('storage:\n  postgres:\n    postgres_url: "postgresql+psycopg2://u@db/d"\n')
    catalog = "postgresql+psycopg2://u@db/iceberg"
    configs = {
        "executor": (f'[executor]\nkind = "dask"\ndagster_home = "{home}"\n',
                     f'{tmp_path / "executor.toml"}: [executor] dagster_home {str(home)!r} (PostgreSQL storage)',
                     "dagster_postgres"),
        "iceberg": (f'[iceberg]\nenabled = true\ncatalog = "{catalog}"\n', f"the Iceberg catalog {catalog}",
                    "psycopg2"),
    }
    for name, (text, feature, module) in configs.items():
        (tmp_path / f"{name}.toml").write_text(text)
        run = subprocess.run([python, "-m", "pipelines.interfaces.cli",
                              "build", "--warehouse", str(warehouse), "--source",
                              f"memtracebench={corpus}", "--config", str(tmp_path / f"{name}.toml")],
                             cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert run.returncode == 2, (name, run.stderr)
        assert run.stderr.strip().splitlines()[-1] == \
            f"tracehouse: {missing_extra_message(feature, 'postgres', module)}"
    assert not (warehouse / "builds").exists()


def test_every_extra_in_the_error_is_one_pyproject_declares() -> None:
    import tomllib

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(EXTRAS) <= set(declared) and set(LEFT_OUT) <= set(EXTRAS)
    dev = " ".join(declared["dev"])
    assert all(extra in dev for extra in EXTRAS)  # make test installs them all
    core = " ".join(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"])
    for tool in ("pyspark", "moto", "selenium", "pytest", "dagster-dask", "obstore", "pyiceberg", "psycopg2"):
        assert tool not in core, f"{tool} is in make run's dependencies"
