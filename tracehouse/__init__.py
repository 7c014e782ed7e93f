"""tracehouse in Python: ``tracehouse.open(W)`` pins one committed build of warehouse ``W`` for a
notebook or a script (docs/PYTHON.md). The implementation is :mod:`pipelines.interfaces.api`; this package is
its name."""

from pipelines.interfaces.api import Build, BuildNotKept, open

__all__ = ["Build", "BuildNotKept", "open"]
