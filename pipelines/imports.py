"""What importing costs a build process, and how it is kept down.

Two libraries import heavy modules only to find out whether they are installed: Great Expectations
imports pyspark (0.2 s and a pandas warning on every build, for Spark data sources tracehouse never
uses), and pyarrow imports pandas at its first ``pa.array()`` (0.3-0.4 s of every build process, to
see whether it was given a pandas object). :func:`hidden` makes them absent for that moment.

Great Expectations also imports, for two expectations tracehouse's suites do not use, scipy.stats
(KL divergence and KS tests) and Altair (their charts): 1-1.5 s of its worker's 3-5 s start, on the
core the build flattens on. :func:`deferred` gives them a stand-in that imports the real module
when it is first used. In that worker, boto3 and botocore (S3 data sources) are hidden as well:
another 0.5-0.8 s (GX's import 2.66-3.31 s instead of 3.32-4.16 s, 3 interleaved rounds).

Dagster's SQL storages, which even its in-memory instance is made of, import alembic for the
migrations of persistent databases: 0.15 s of every build process, which never migrates one.
:func:`deferred_names` gives them stand-ins for the five names they import from alembic.

The modules a build imports (Dagster, SQLAlchemy, DuckDB, pyarrow; GX in its worker) make hundreds of
thousands of objects that live as long as the process; :func:`frozen_imports` keeps the garbage
collector from scanning them over and over.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.abc
import importlib.util
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


class _Hidden(importlib.abc.MetaPathFinder):
    """Importing one of ``names`` (or a submodule) raises ModuleNotFoundError while this finder
    leads sys.meta_path; a module already imported is found in sys.modules first, as usual."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.split(".", 1)[0] in self.names:
            raise ModuleNotFoundError(f"{name} is hidden here (pipelines.imports)", name=name)


@contextmanager
def hidden(*names: str) -> Iterator[None]:
    """Meanwhile, ``import`` of these modules fails as if they were not installed; after it, they
    import as usual."""
    finder = _Hidden(names)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def _real_module(stand_in: types.ModuleType) -> Any:
    """The module ``stand_in`` stands in for, imported now (the stand-in leaves sys.modules first)."""
    if sys.modules.get(stand_in.__name__) is stand_in:
        del sys.modules[stand_in.__name__]
    return importlib.import_module(stand_in.__name__)


@contextmanager
def _standing_in(stand_in: Callable[[str], types.ModuleType], names: tuple[str, ...]) -> Iterator[None]:
    """Meanwhile, each of these modules not imported yet is ``stand_in(name)`` in sys.modules; after
    it, importing them imports them (a stand-in handed out meanwhile still works)."""
    placed = {name: stand_in(name) for name in names if name not in sys.modules}
    sys.modules.update(placed)
    try:
        yield
    finally:
        for name, module in placed.items():
            if sys.modules.get(name) is module:
                del sys.modules[name]


class _Deferred(types.ModuleType):
    """Stands in for a module not imported yet: the first attribute asked of it (other than those
    every module has, which the import system reads) imports the real module and answers from it."""

    def __getattr__(self, attr: str) -> Any:
        real = self.__dict__.get("_deferred_real")
        if real is None:
            real = self.__dict__["_deferred_real"] = _real_module(self)
        return getattr(real, attr)


def deferred(*names: str) -> contextlib.AbstractContextManager[None]:
    """Meanwhile, importing one of these modules (not imported yet) gives a stand-in that imports it
    at its first use. For modules imported by a library and used only in functions a process never
    calls."""
    return _standing_in(_Deferred, names)


class _DeferredName:
    """Stands for ``module.name`` until it is called or an attribute is asked of it; then imports
    the module and answers with the real object."""

    def __init__(self, stand_in: _DeferredNames, name: str) -> None:
        self._stand_in, self._name = stand_in, name

    def _real(self) -> Any:
        return getattr(_real_module(self._stand_in), self._name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._real()(*args, **kwargs)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._real(), attr)


class _DeferredNames(types.ModuleType):
    """Stands in for a module not imported yet: every name imported from it is a _DeferredName."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _DeferredName(self, name)


def deferred_names(*names: str) -> contextlib.AbstractContextManager[None]:
    """Meanwhile, ``from module import name`` of one of these modules (not imported yet) gives a
    stand-in for the name, which imports the module when it is first called or asked an attribute
    (a function called, a class instantiated or its class method called: not for ``isinstance``)."""
    return _standing_in(_DeferredNames, names)


class _PandasArrival(importlib.abc.MetaPathFinder):
    """Once anybody imports pandas, turn pyarrow's pandas support back on (see skip_pandas_probe)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "pandas":
            return None
        with contextlib.suppress(ValueError):  # the import lock serializes this; removed once is enough
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenPyarrow(spec.loader)
        return spec


class _ThenPyarrow(importlib.abc.Loader):
    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        import pyarrow as pa

        module.__spec__.loader = module.__loader__ = self.loader
        self.loader.exec_module(module)
        pa.lib._pandas_api.pd  # noqa: B018  # asked for pandas itself, pyarrow imports it (loaded now) again


def skip_pandas_probe() -> None:
    """Make pyarrow's first array of this process with pandas hidden, so pyarrow records pandas as
    absent instead of importing it; whoever imports pandas later turns pyarrow's pandas support back
    on (:class:`_PandasArrival`), and ``to_pandas()`` would import it anyway. For processes that never
    give pyarrow pandas objects (Great Expectations converts its tables with ``to_pandas()``)."""
    if "pandas" in sys.modules:
        return
    import pyarrow as pa

    with hidden("pandas"):
        pa.array([0])
    if "pandas" not in sys.modules and not any(isinstance(f, _PandasArrival) for f in sys.meta_path):
        sys.meta_path.insert(0, _PandasArrival())


YOUNG_GENERATION_THRESHOLD = 20_000  # allocations between two young collections (Python's default: 700)
_FROZEN = False


@contextmanager
def frozen_imports() -> Iterator[None]:
    """Import, meanwhile, what the process keeps to its end, with the cyclic garbage collector off;
    then freeze everything made so far (``gc.freeze``: no later collection scans it) and collect
    less often. Importing the build's modules makes about 300,000 objects, which the collector
    scanned again and again while they were made and at every full collection after: 0.54-0.63 s
    of a 32-graph build process's CPU in collections, 0.08-0.13 s with this (``gc.callbacks``).
    Once per process: later calls (a test process building many times) only import."""
    global _FROZEN
    if _FROZEN:
        yield
        return
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        _FROZEN = True
        gc.freeze()
        _, older, oldest = gc.get_threshold()
        gc.set_threshold(YOUNG_GENERATION_THRESHOLD, older, oldest)
        if was_enabled:
            gc.enable()
