"""Shared fixtures: the real records in ../shared/data, the generated sample corpus, and built
warehouses (each built once per test session through the real CLI build path)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
# Drill-down pictures cost ~0.1 s each; tests that check them set their own limit.
os.environ.setdefault("TRACEHOUSE_DRILLDOWN_LIMIT", "12")

REPO = Path(__file__).resolve().parent.parent

# The slow tier: tests that need a server, a browser, a JVM, a cluster or a second Python environment.
# `make test` runs every test; `make test-fast` deselects these (-m "not slow"). A test is slow when
# its module is listed here or it uses one of these fixtures; a test can also say so itself
# (@pytest.mark.slow).
SLOW_MODULES = {
    "test_spark": "a JVM (Spark)",
    "test_object_storage": "an S3 server (moto)",
    "test_executor": "a Dask cluster and PostgreSQL",
    "test_duckdb_compat": "a second Python environment (DuckDB 1.5)",
}
SLOW_FIXTURES = {
    "browser": "headless Chromium",
    "chromium": "headless Chromium",
    "s3_endpoint": "an S3 server (moto)",
    "postgres": "a PostgreSQL server",
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow: needs a server, browser, JVM, cluster or second environment (make test-fast skips it)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        module = item.module.__name__ if getattr(item, "module", None) else ""
        needs = SLOW_MODULES.get(module) or next(
            (why for name, why in SLOW_FIXTURES.items() if name in getattr(item, "fixturenames", ())), None)
        if needs and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow(reason=needs))


SHARED_DATA = REPO.parent / "shared" / "data"
WHOWHEN = SHARED_DATA / "whowhen"
TRACERTRAJ = SHARED_DATA / "tracertraj"


def needs_shared_data() -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        not (WHOWHEN.is_dir() and TRACERTRAJ.is_dir()),
        reason="../shared/data (real Who&When and TracerTraj records) is not present in this clone",
    )


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not (WHOWHEN.is_dir() and TRACERTRAJ.is_dir()):
        pytest.skip("../shared/data (real Who&When and TracerTraj records) is not present in this clone")
    return SHARED_DATA


@pytest.fixture(scope="session", autouse=True)
def gx_loaded_once() -> None:
    """Great Expectations loaded once in the test process, as `tracehouse watch` holds it: the builds
    a test runs in this process then validate here, not each in a GX worker that imports GX again
    (3-5 s a build, dozens of builds). The worker is tested where it is the point: every build run
    through the CLI (a fresh process) and tests/test_validation.py's worker tests, which empty this
    process's runners first (as_a_fresh_build_process)."""
    from pipelines.validation import gx_runner

    gx_runner.runner_for()


@pytest.fixture(scope="session")
def sample_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default embedded corpus (seed 0), unpacked once from the shipped archive, as `make run`
    does (tests/test_sample_corpus.py holds the archive byte-equal to a fresh generation); generated
    when the checkout has no archive."""
    from pipelines.sample import archive
    from pipelines.sample.corpus import generate_corpus

    out = tmp_path_factory.mktemp("sample") / "corpus"
    if not archive.unpack({"corpus": out}):
        generate_corpus(out)
    return out


def build_warehouse(warehouse: Path, sources: list[str], **flags):
    from pipelines.config import load_settings
    from pipelines.interfaces.build import run_build

    settings = load_settings(str(warehouse), sources, config=None)
    return run_build(settings, progress=False, **flags)


@pytest.fixture(scope="session")
def multi_agent_warehouse(shared_data: Path, tmp_path_factory: pytest.TempPathFactory):
    """A warehouse built from the real Who&When and TracerTraj records."""
    warehouse = tmp_path_factory.mktemp("wh-multi") / "warehouse"
    summary = build_warehouse(
        warehouse, [f"whowhen={shared_data / 'whowhen'}", f"tracertraj={shared_data / 'tracertraj'}"]
    )
    return warehouse, summary


@pytest.fixture(scope="session")
def sample_warehouse(sample_corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    """A warehouse built from the default sample corpus as a MemTraceBench source."""
    warehouse = tmp_path_factory.mktemp("wh-sample") / "warehouse"
    summary = build_warehouse(warehouse, [f"memtracebench={sample_corpus}"])
    return warehouse, summary


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):
    """Headless Chromium (tests/browser.py) that reaches no network: every proxied request would fail,
    and show up in the performance log. A module that needs another window defines its own."""
    from browser import chromium

    with chromium(tmp_path_factory.mktemp("chromium-profile"), logs={"browser": "ALL", "performance": "ALL"}) as driver:
        yield driver


def query(warehouse: Path, sql: str, params: list | None = None) -> list[tuple]:
    """Run SQL on a built warehouse through its published database (read-only)."""
    from pipelines.analytics import db
    from pipelines.storage.warehouse import Warehouse

    con = db.connect(Warehouse(warehouse))
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def every_row(warehouse: Path) -> dict[str, list[tuple]]:
    """Every row of every table and mart of the committed build, through DuckDB over its files. No
    column is left out: no row holds a generation id, a time or a path of the warehouse, so two builds
    of the same files agree on every column (the generations' and marts' file names differ)."""
    from pipelines import schema
    from pipelines.analytics import db
    from pipelines.storage.warehouse import Warehouse

    con = db.connect(Warehouse(warehouse))
    try:
        return {name: con.execute(f'select * from "{name}" order by all').fetchall()
                for name in [*schema.TABLES, *db.mart_names()]}
    finally:
        con.close()


# -- an S3-compatible server for the object-storage tests ------------------------------------------


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory):
    """moto's S3 server on 127.0.0.1 in its own process (tests/s3server.py), stopped by its process
    id. Yields the endpoint URL; tests set the AWS variables with :func:`s3_environment`."""
    from s3server import S3Server

    try:
        server = S3Server(tmp_path_factory.mktemp("moto"))
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield server.endpoint
    finally:
        server.stop()


def s3_environment(monkeypatch: pytest.MonkeyPatch, endpoint: str, cache: Path) -> None:
    """The usual AWS variables, pointed at the test server, and a cache of working copies."""
    from s3server import CREDENTIALS

    for name, value in {**CREDENTIALS, "AWS_ENDPOINT_URL": endpoint, "TRACEHOUSE_CACHE": str(cache)}.items():
        monkeypatch.setenv(name, value)


def s3_client(endpoint: str):
    from s3server import s3_client

    return s3_client(endpoint)


def upload_folder(endpoint: str, folder: Path, bucket: str, prefix: str) -> None:
    client = s3_client(endpoint)
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            client.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(folder).as_posix()}")


def wait_for_ui(proc, port: int, seconds: float = 120) -> None:
    """Until the Dagster webserver ``tracehouse ui`` started answers on ``port`` (fails if ``proc``
    ends first, with its stderr, or after ``seconds``)."""
    import time
    import urllib.request

    deadline = time.monotonic() + seconds
    while True:
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        assert time.monotonic() < deadline, "the UI did not come up"
        time.sleep(0.5)
