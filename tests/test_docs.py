"""The docs say what the code does: every column, mart, check and command is documented."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import REPO

from pipelines import db, schema
from pipelines.cli import COMMANDS, make_parser


def doc(name: str) -> str:
    return (REPO / name).read_text()


def test_every_column_of_every_table_is_documented() -> None:
    text = doc("docs/TABLES.md")
    for table, table_schema in schema.TABLES.items():
        section = text.split(f"## {table} ", 1)[1].split("\n## ", 1)[0]
        for field in table_schema:
            assert re.search(rf"\b{field.name}\b", section), f"{table}.{field.name} missing from docs/TABLES.md"


def test_every_mart_and_check_is_documented() -> None:
    for mart in db.mart_names():
        assert mart in doc("docs/MARTS.md"), mart
    for check in sorted((REPO / "sql" / "checks").glob("*.sql")):
        name = check.stem
        generic = re.sub(r"^duplicate_\w+_keys$", "duplicate_<row>_keys", name)
        generic = re.sub(r"^(nodes|operations|edges)_with_unknown_session$", "<table>_with_unknown_session", generic)
        assert name in doc("docs/VALIDATION.md") or generic in doc("docs/VALIDATION.md"), name


def test_every_command_is_in_the_readme_and_the_help() -> None:
    readme, help_text = doc("README.md"), make_parser().format_help()
    for command in COMMANDS:
        assert f"tracehouse {command}" in readme, command
        assert command in help_text, command


def test_the_readme_commands_are_the_makefile_and_ci_ones() -> None:
    readme, makefile = doc("README.md"), doc("Makefile")
    assert "make run" in readme and "make test" in readme
    assert re.search(r"^run:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    ci = [line for line in doc(".ci/run").splitlines() if line and not line.startswith("#")]
    assert ci[-1] == "make test"
    assert (REPO / ".python-version").read_text().strip() == "3.12"


def test_every_dagster_package_is_pinned_in_lockstep() -> None:
    """Dagster's core packages share one version (1.M.P); its integration libraries (dagster-dask) are
    released with it as 0.(M+16).P and pin that core version exactly."""
    def core(version: str) -> str:
        major, minor, patch = version.split(".")
        return version if major == "1" else f"1.{int(minor) - 16}.{patch}"

    pins = re.findall(r'"(dagster[\w-]*)==([\d.]+)"', doc("pyproject.toml"))
    assert len(pins) >= 2 and len({core(version) for _, version in pins}) == 1, pins
    assert Path(REPO / "pyproject.toml").read_text().count("==") >= 15  # every dependency pinned


_REPO_PATH = re.compile(
    r"(?<![\w/.<-])((?:pipelines|sql|docs|tests|dashboards|expectations|bench)/[\w./-]*\.(?:py|sql|md|yml|json|csv|j2|css|js|toml))\b"
)


def test_every_path_a_doc_names_exists() -> None:
    """Paths of the repository named in README.md, BENCHMARKS.md and docs/ (files with a suffix; the
    warehouse's own paths such as dashboards/index.html are not repository files and have none of
    those suffixes)."""
    docs = [REPO / "README.md", REPO / "BENCHMARKS.md", *sorted((REPO / "docs").glob("*.md")),
            *sorted((REPO / "pipelines").rglob("*.py")), *sorted((REPO / "dashboards").rglob("*.py"))]
    missing = []
    for path in docs:
        for match in _REPO_PATH.finditer(path.read_text()):
            if not (REPO / match.group(1)).exists():
                missing.append(f"{path.name}: {match.group(1)}")
    assert missing == []


def test_every_mart_view_seed_macro_and_check_is_declared_and_described() -> None:
    from pipelines import catalog

    for mart in catalog.marts().values():  # loading checks that every file has its declaration
        assert mart.description and mart.grain and set(mart.columns) and all(mart.columns.values()), mart.name
    assert set(catalog.views()) == {*schema.TABLES, "input_files"}
    assert all(v["description"] for v in catalog.views().values())
    assert all(s["description"] and s["columns"] for s in catalog.seeds().values())
    assert all(m["description"] and m["signature"] for m in catalog.macros().values())
    assert all(t.description for t in catalog.table_tests())
    for mart in catalog.marts():
        assert f"`{mart}`" in doc("docs/MARTS.md") or mart in doc("docs/MARTS.md"), mart


def test_chart_colours_are_the_seed_values() -> None:
    """sql/seeds/colors.csv colours exactly the values of the seeds (plus each chart's folded row), one
    distinct #rrggbb per value, and the charts take their colours from it."""
    from dashboards import charts

    rows = schema.seed_rows("colors")
    assert all(re.fullmatch(r"#[0-9a-f]{6}", r["color"]) for r in rows), rows
    by_dimension: dict[str, list[str]] = {}
    for r in rows:
        by_dimension.setdefault(r["dimension"], []).append(r["value"])
    roles = {r["agent_role"] for r in schema.seed_rows("operation_types") if r["kind"] == "agent"}
    assert set(by_dimension["system"]) == set(schema.KNOWN_SYSTEMS)
    assert set(by_dimension["error_type"]) == {*schema.ERROR_TYPES, "unlabelled"}
    assert set(by_dimension["stage"]) == {r["stage"] for r in schema.seed_rows("error_types")} | {schema.UNKNOWN}
    assert set(by_dimension["agent_role"]) == roles | {"other"}
    assert set(by_dimension) == {"system", "error_type", "stage", "agent_role"}
    for values in by_dimension.values():
        assert len(values) == len(set(values))
    assert len({charts.SYSTEM_COLORS[s] for s in schema.KNOWN_SYSTEMS}) == len(schema.KNOWN_SYSTEMS)
    assert list(charts.SYSTEM_COLORS) == by_dimension["system"]
    assert charts.ERROR_COLORS["ExtractionError"] == next(
        r["color"] for r in rows if r["dimension"] == "error_type" and r["value"] == "ExtractionError")
