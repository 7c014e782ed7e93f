"""Dependencies only through their documented public interfaces: no module of pipelines/ or dashboards/
imports a ``_``-prefixed module of a library (``import x._y``, ``from x._y import ...``,
``from x import _y``), which the library may change in any release without a word. A source scan with
``ast``; and a scan of the source text for the devices issue 32 removed (storage subclasses,
pyiceberg's snapshot producer and transaction internals, stand-in modules, a frozen garbage collector,
``os._exit``, DuckDB's serialized SQL tree, Altair's schema internals)."""

from __future__ import annotations

import ast

from conftest import REPO

OURS = ("pipelines", "dashboards")
# Written as a grep would find them in our source; none may come back.
DEVICES = ("_SnapshotProducer", "transaction._", "gc.freeze", "os._exit", "_run_exitfuncs",
           "sys.modules[", "debug_mode", "EventLogStorage)", "RunStorage)", "_pandas_api",
           "dagster._core")  # also as a string: the generated dagster.yaml names modules as Dagster's reference does


def private_imports(source: str) -> list[str]:
    """The ``_``-prefixed modules (or names) of other packages a module's source imports, as written."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if is_private(alias.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:  # relative ones are ours
            if is_private(node.module):
                found.append(node.module)
            else:
                found += [f"{node.module}.{alias.name}" for alias in node.names
                          if is_private(f"{node.module}.{alias.name}")]
    return sorted(set(found))


def is_private(name: str) -> bool:
    """``x._y...`` or ``x.y._z``, with ``x`` another package than ours."""
    package, *parts = name.split(".")
    return package not in OURS and package != "__future__" and any(part.startswith("_") for part in parts)


def offenders() -> dict[str, list[str]]:
    """File (relative to the repo) -> the private modules it imports."""
    found = {}
    for package in OURS:
        for path in sorted((REPO / package).rglob("*.py")):
            imports = private_imports(path.read_text(encoding="utf-8"))
            if imports:
                found[path.relative_to(REPO).as_posix()] = imports
    return found


def test_the_scan_finds_every_form_of_a_private_import() -> None:
    source = ("import dagster._core.instance\nfrom dagster._core.storage import x\nfrom dagster import _check\n"
              "import dagster as dg\nfrom pipelines._internal import y\nfrom . import _ours\n"
              "from __future__ import annotations\nfrom dagster import asset\n")
    assert private_imports(source) == ["dagster._check", "dagster._core.instance", "dagster._core.storage"]


def test_no_module_imports_a_private_module_of_a_dependency() -> None:
    found = offenders()
    assert not found, f"private modules of dependencies imported (use their public API): {found}"


def test_no_module_uses_a_removed_device() -> None:
    used = {f"{path.relative_to(REPO).as_posix()}: {device}"
            for package in OURS for path in sorted((REPO / package).rglob("*.py"))
            for device in DEVICES if device in path.read_text(encoding="utf-8")}
    assert not used, sorted(used)


def test_the_warehouse_instance_is_configured_through_documented_names(tmp_path) -> None:
    """The generated dagster.yaml spells its modules as Dagster's dagster.yaml reference does
    (dagster.core...) and still gets the one-file SQLite event log and no captured step output."""
    from pipelines.builds.run_history import instance_for
    from pipelines.storage.warehouse import Warehouse

    instance = instance_for(Warehouse(tmp_path / "w"))
    config = (tmp_path / "w" / ".dagster" / "dagster.yaml").read_text()
    assert "dagster.core.storage" in config and "_core" not in config
    assert type(instance.event_log_storage).__name__ == "ConsolidatedSqliteEventLogStorage"
    assert type(instance.compute_log_manager).__name__ == "NoOpComputeLogManager"
