"""Where a build runs its per-partition flattening steps: in the build's own process (the default),
or as steps of one Dagster job on a Dask cluster (``tracehouse build --executor dask``, docs/SCALE.md).

The choice comes from the flags, then ``[executor]`` in tracehouse.toml, then the default::

    [executor]
    kind = "dask"              # in_process | dask
    workers = 4                # dask: worker processes tracehouse starts (default 2)
    # scheduler = "tcp://host:8786"   # dask: run on an existing cluster instead of starting one
    # dagster_home = "/srv/dagster"   # dask: the Dagster instance (its dagster.yaml) the steps record
                                      # their events in, for workers on other machines (default: the
                                      # warehouse's own, <warehouse>/.dagster, a SQLite file); with
                                      # dagster-postgres: postgres_url: "postgresql+psycopg2://..."

Nothing here imports Dask: it is imported only by a build that asked for it (pipelines.interfaces.fanout).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines import extras
from pipelines.config import ConfigError

KINDS = ("in_process", "dask")
DEFAULT_WORKERS = 2


@dataclass(frozen=True)
class ExecutorSettings:
    kind: str = "in_process"
    workers: int = DEFAULT_WORKERS  # dask: how many single-threaded worker processes to start
    scheduler: str | None = None  # dask: an existing scheduler's address (then no cluster is started)
    dagster_home: Path | None = None  # dask: the instance the fan-out run is recorded in (None: the warehouse's)

    @property
    def distributed(self) -> bool:
        return self.kind != "in_process"


IN_PROCESS = ExecutorSettings()


def executor_settings(
    config_file: Path | None = None,
    kind: str | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
) -> ExecutorSettings:
    """The executor a build uses: flags (``kind``, ``workers``, ``scheduler``; None = not given) over
    ``[executor]`` of ``config_file`` over the default (in-process). Raises ConfigError for a setting
    that cannot be used, e.g. ``--workers`` for an in-process build: silently ignoring it would leave
    a user believing the build ran distributed."""
    table = _table(config_file)
    where = f"{config_file}: [executor]" if config_file else "[executor]"
    kind_flag = kind is not None
    kind = kind or table.get("kind") or "in_process"
    if kind not in KINDS:
        raise ConfigError(f"{where} kind must be one of {', '.join(KINDS)}, got {kind!r}")
    from_file_workers, from_file_scheduler = table.get("workers"), table.get("scheduler")
    if from_file_workers is not None and (isinstance(from_file_workers, bool) or not isinstance(from_file_workers, int)
                                          or from_file_workers < 1):
        raise ConfigError(f"{where} workers must be a whole number of at least 1, got {from_file_workers!r}")
    if from_file_scheduler is not None and not isinstance(from_file_scheduler, str):
        raise ConfigError(f"{where} scheduler must be an address such as 'tcp://host:8786'")
    if workers is not None and workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {workers}")
    if kind == "in_process":
        if workers is not None or scheduler is not None:
            raise ConfigError("--workers and --scheduler need --executor dask")
        return IN_PROCESS
    extras.require("dask", f"--executor {kind}" if kind_flag else f'{where} kind = "{kind}"')
    if workers is not None and scheduler is not None:
        raise ConfigError("give --workers (a cluster tracehouse starts) or --scheduler (an existing one), not both")
    if workers is None and scheduler is None:
        workers, scheduler = from_file_workers, from_file_scheduler
        if workers is not None and scheduler is not None:
            raise ConfigError(f"{where} gives both workers and scheduler: keep one")
    if scheduler is not None:
        scheduler = scheduler.strip()
        if "://" not in scheduler:
            scheduler = f"tcp://{scheduler}"
    home = table.get("dagster_home")
    if home is not None:
        home = Path(home).expanduser()
        if config_file is not None and not home.is_absolute():
            home = Path(config_file).resolve().parent / home
        if not (home / "dagster.yaml").is_file():
            raise ConfigError(f"{where} dagster_home {str(home)!r} holds no dagster.yaml (a Dagster instance's "
                              "folder, e.g. with PostgreSQL storage for workers on other machines)")
        if _needs_postgres(home / "dagster.yaml"):
            extras.require("postgres", f"{where} dagster_home {str(home)!r} (PostgreSQL storage)", ["dagster_postgres"])
    return ExecutorSettings(kind, workers or DEFAULT_WORKERS, scheduler, home)


def _table(config_file: Path | None) -> dict[str, Any]:
    """``[executor]`` of the config file (its keys were checked by pipelines.config.check_keys)."""
    if config_file is None or not Path(config_file).is_file():
        return {}
    try:
        table = tomllib.loads(Path(config_file).read_text()).get("executor", {})
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{config_file}: {exc}") from None
    if not isinstance(table, dict):
        raise ConfigError(f"{config_file}: 'executor' must be a table ([executor])")
    return table


def _needs_postgres(dagster_yaml: Path) -> bool:
    """Whether a Dagster instance's dagster.yaml keeps its storage in PostgreSQL (``storage: postgres:``
    or a ``module: dagster_postgres...`` entry), so that a missing dagster-postgres is named before a
    build starts rather than by the first worker step."""
    import yaml

    try:
        data = yaml.safe_load(dagster_yaml.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{dagster_yaml}: {exc}") from None

    def named(node: Any) -> bool:
        if isinstance(node, dict):
            return any((key == "module" and str(value).split(".")[0] == "dagster_postgres") or named(value)
                       for key, value in node.items())
        return isinstance(node, list) and any(named(item) for item in node)

    storage = data.get("storage") if isinstance(data, dict) else None
    return (isinstance(storage, dict) and "postgres" in storage) or named(data)
