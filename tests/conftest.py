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


@pytest.fixture(scope="session")
def sample_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default embedded corpus (seed 0), generated once."""
    from pipelines.sample import generate_corpus

    out = tmp_path_factory.mktemp("sample") / "corpus"
    generate_corpus(out)
    return out


def build_warehouse(warehouse: Path, sources: list[str], **flags):
    from pipelines.build import run_build
    from pipelines.config import load_settings

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


def query(warehouse: Path, sql: str, params: list | None = None) -> list[tuple]:
    """Run SQL on a built warehouse through its published database (read-only)."""
    from pipelines import db
    from pipelines.storage import Warehouse

    con = db.connect(Warehouse(warehouse))
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()
