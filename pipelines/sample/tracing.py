"""A thin helper over smartcomment's public tracing API, plus the post-processing that makes exports
reproducible.

smartcomment stamps every object with the wall clock (``created_at``), gives operations and edges
uuid4 ids, and records the absolute path and line of the calling frame. None of that is reproducible,
so :class:`Tracer` keeps a simulated clock and the real call site of every object it creates, and
:func:`finalize_export` rewrites the exported dict afterwards: operation and edge ids are remapped in
order of first appearance to hex derived from a seed-dependent salt, ``created_at`` comes from the
simulated clock (increasing, in "YYYY-MM-DD HH:MM:SS.sss"), and file names are made relative to the
repository (``pipelines/sample/systems/mem0.py``).

Every node gets a meaningful name through a constant ``id_strategy`` (message ids such as
``U1:D2:5``, ``mem-3``, query ids), instead of smartcomment's default content hash, and values are
stored as given (an identity ``encoding_fn``) rather than through ``repr``.
"""

from __future__ import annotations

import hashlib
import inspect
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from smartcomment import comment_op, comment_session, comment_variable, current_graph
from smartcomment.runtime.variable import RuntimeVariable

REPO_ROOT = Path(__file__).resolve().parents[2]
_ROOT_PREFIX = str(REPO_ROOT) + "/"
CLOCK_EPOCH = datetime(2025, 1, 1)
BIG_VALUE = 100_000  # chars; larger output values are recorded through comment_variable

# Simulated latencies (ms) by operation category: LLM calls are slow, buffer edits are instant.
LATENCY_MS: dict[str, tuple[int, int]] = {
    "extraction": (700, 2600),
    "update": (2, 40),
    "boundary_detection": (300, 900),
    "initialization": (5, 30),
    "embedding": (15, 80),
    "retrieval": (8, 160),
    "evaluation": (600, 2400),
}


def _ident(value: str) -> str:
    return value


def named(name: str) -> Callable[[Any], str]:
    """An id strategy that gives the node a fixed, meaningful name."""
    return lambda _value: name


@dataclass(frozen=True)
class Out:
    """An output variable of an operation, created by :meth:`Tracer.op` after the operation starts."""

    value: str
    name: str
    class_name: str | None = None
    category: str = "variable"
    comment: str | None = None
    metadata: dict[str, Any] | None = None


def format_ms(ms: int) -> str:
    """Simulated clock (ms since 2025-01-01) as smartcomment's "YYYY-MM-DD HH:MM:SS.sss"."""
    return (CLOCK_EPOCH + timedelta(milliseconds=ms)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


class Tracer:
    """Creates traced sessions, variables and operations, recording a simulated time and call site."""

    def __init__(self, start_ms: int, rng: random.Random) -> None:
        self.start_ms = start_ms
        self.now = start_ms
        self.rng = rng
        self.stamps: dict[str, tuple[int, str, int]] = {}
        self.op_end: dict[str, int] = {}

    @staticmethod
    def call_site(depth: int = 0) -> tuple[str, int]:
        """File and line of the caller's caller, ``depth`` frames further up."""
        frame = inspect.currentframe()  # this function's; the documented way up is f_back
        for _ in range(depth + 1):
            frame = frame.f_back if frame is not None else None
        if frame is None:
            return "<unknown>", 0
        return frame.f_code.co_filename, frame.f_lineno

    def tick(self, ms: int = 1) -> int:
        self.now += ms
        return self.now

    @contextmanager
    def session(self, session_id: str, category: str, *, comment: str | None = None,
                metadata: dict[str, Any] | None = None) -> Iterator[None]:
        """A smartcomment session with an explicit id."""
        site = self.call_site(2)
        self.tick(self.rng.randint(50, 400))
        with comment_session(session_id=session_id, category=category, comment=comment, metadata=metadata):
            self.stamps["session:" + session_id] = (self.now, *site)
            yield

    def var(self, value: str, name: str, *, class_name: str | None = None, category: str = "variable",
            comment: str | None = None, metadata: dict[str, Any] | None = None,
            site: tuple[str, int] | None = None) -> RuntimeVariable[str]:
        """Record a string value as a node named ``class_name:name`` (a new version if it changed)."""
        rv = comment_variable(
            value, to_runtime=True, id_strategy=named(name), encoding_fn=_ident, class_name=class_name,
            category=category, comment=comment, metadata=metadata,
        )
        key = "node:" + rv.full_node_id
        if key not in self.stamps:
            self.stamps[key] = (self.tick(), *(site or self.call_site(1)))
        return rv

    def op(self, op_name: str, category: str, inputs: list[RuntimeVariable[str]],
           outputs: list[Out | RuntimeVariable[str]], *, comment: str | None = None,
           metadata: dict[str, Any] | None = None) -> tuple[str, list[RuntimeVariable[str]]]:
        """Record one operation from ``inputs`` to ``outputs``; returns its op_id and the output handles.

        Outputs are passed to one ``comment_op`` call as (value, options) items, so smartcomment
        creates them after the operation record and inspects the stack once per operation rather than
        once per node. Very large values are recorded first with ``comment_variable`` because
        ``comment_op`` logs a ``repr`` of every (value, options) item.
        """
        site = self.call_site(1)
        start = self.tick(self.rng.randint(1, 5))
        lo, hi = LATENCY_MS.get(category, (1, 20))
        items: list[Any] = []
        for o in outputs:
            if isinstance(o, RuntimeVariable):
                items.append(o)
            elif len(o.value) > BIG_VALUE:
                self.tick(self.rng.randint(lo, hi))
                items.append(self.var(o.value, o.name, class_name=o.class_name, category=o.category,
                                      comment=o.comment, metadata=o.metadata, site=site))
            else:
                items.append((o.value, {"id_strategy": named(o.name), "encoding_fn": _ident,
                                        "class_name": o.class_name, "category": o.category,
                                        "comment": o.comment, "metadata": o.metadata}))
        op = comment_op(inputs=list(inputs), outputs=items, op_name=op_name, category=category,
                        comment=comment, metadata=metadata)
        assert op is not None, "smartcomment tracing is disabled"
        self.stamps["op:" + op.op_id] = (start, *site)
        self.tick(self.rng.randint(lo, hi))
        graph = current_graph()
        assert graph is not None
        outs: list[RuntimeVariable[str]] = []
        for o, item in zip(outputs, items, strict=True):
            rv = item if isinstance(item, RuntimeVariable) else graph.get_latest_variable(
                f"{o.class_name}:{o.name}" if o.class_name is not None else o.name)
            key = "node:" + rv.full_node_id
            if key not in self.stamps:
                self.stamps[key] = (self.tick(), *site)
            outs.append(rv)
        self.op_end[op.op_id] = self.tick()
        return op.op_id, outs

    def stamp_op(self, op_id: str, start: int, site: tuple[str, int]) -> None:
        """Record an operation created through another API (``comment_fn``, ``comment_op_scope``)."""
        self.stamps["op:" + op_id] = (start, *site)
        self.op_end[op_id] = self.tick()


def _relative(filename: str) -> str:
    return filename[len(_ROOT_PREFIX):] if filename.startswith(_ROOT_PREFIX) else filename


def _hex_id(salt: str, kind: str, index: int) -> str:
    return hashlib.sha1(f"{salt}:{kind}:{index}".encode()).hexdigest()[:32]


def finalize_export(export: dict[str, Any], tracer: Tracer, salt: str) -> dict[str, str]:
    """Make an exported graph reproducible in place; returns the old -> new operation id map."""
    data = export["data"]
    op_map: dict[str, str] = {}
    for i, op in enumerate(data["operations"]):
        old = op["op_id"]
        if not old.startswith("op-"):
            continue  # smartcomment's reserved sentinel operation keeps its id
        op_map[old] = f"op-{_hex_id(salt, 'op', i)}"

    def _place(obj: dict[str, Any], stamp: tuple[int, str, int] | None, ms: int | None = None) -> None:
        if stamp is not None:
            obj["created_at"] = format_ms(stamp[0] if ms is None else ms)
            obj["filename"], obj["lineno"] = _relative(stamp[1]), stamp[2]
        else:
            obj["created_at"] = format_ms(ms if ms is not None else tracer.start_ms)
            obj["filename"] = _relative(obj["filename"])
        obj["trigger_point"] = f"{obj['filename']}:{obj['lineno']}"

    export["created_at"] = format_ms(tracer.start_ms)
    for session in data["sessions"]:
        _place(session, tracer.stamps.get("session:" + session["session_id"]))
    for op in data["operations"]:
        old = op["op_id"]
        _place(op, tracer.stamps.get("op:" + old))
        op["op_id"] = op_map.get(old, old)
    first_in: dict[str, int] = {}
    for i, edge in enumerate(data["edges"]):
        old_op = edge["op_id"]
        end = tracer.op_end.get(old_op, tracer.start_ms)
        _place(edge, tracer.stamps.get("op:" + old_op), ms=end)
        edge["op_id"] = op_map.get(old_op, old_op)
        edge["edge_id"] = f"edge-{_hex_id(salt, 'edge', i)}"
        first_in.setdefault(edge["target_full_node_id"], end)
    for node in data["nodes"]:
        stamp = tracer.stamps.get("node:" + node["full_node_id"])
        _place(node, stamp, ms=None if stamp else first_in.get(node["full_node_id"]))
    return op_map
