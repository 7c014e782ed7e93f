"""The optional parts of tracehouse, installed as extras (pyproject.toml), and the one error a
command gives when it needs one that is missing.

``pip install -e .`` (``make run``) installs what the main job needs on local disk; the scale-out
features each need an extra: ``tracehouse[dask]`` (``--executor dask``), ``tracehouse[s3]``
(``s3://`` warehouses and sources), ``tracehouse[iceberg]`` (``--iceberg``), ``tracehouse[postgres]``
(a PostgreSQL Iceberg catalog or Dagster instance). Code that imports an extra's module first asks
:func:`require`, so a missing one stops the command with one line naming the extra (exit status 2,
as a usage error) instead of a traceback from deep inside a build.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

from pipelines.errors import ConfigError

# extra -> the modules its features import (pyproject.toml's [project.optional-dependencies])
EXTRAS: dict[str, tuple[str, ...]] = {
    "dask": ("dagster_dask", "distributed"),
    "s3": ("obstore",),
    "iceberg": ("pyiceberg",),
    "postgres": ("psycopg2", "dagster_postgres"),
}


class MissingExtra(ConfigError):
    """A feature was asked for whose extra is not installed (a usage error: the CLI exits with 2)."""


def missing_extra_message(feature: str, extra: str, module: str) -> str:
    """The one line a command stops with when ``module`` of ``extra`` is not installed."""
    return f"{feature} needs the {extra} extra (no module named {module!r}): pip install 'tracehouse[{extra}]'"


def require(extra: str, feature: str, modules: Sequence[str] | None = None) -> None:
    """Check that the modules of ``extra`` (or those of them in ``modules``) that ``feature`` (as the
    user asked for it, e.g. ``--executor dask``) imports are installed, or raise :class:`MissingExtra`
    naming the extra and the first module missing. Checks without importing: the code that uses a
    module imports it when it needs it."""
    wanted = EXTRAS[extra] if modules is None else tuple(modules)
    unknown = set(wanted) - set(EXTRAS[extra])
    if unknown:
        raise ValueError(f"{sorted(unknown)} are not modules of the {extra} extra")
    for module in wanted:
        if importlib.util.find_spec(module) is None:
            raise MissingExtra(missing_extra_message(feature, extra, module))
