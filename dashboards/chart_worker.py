"""Chart specs and pictures made in a worker process, while the build goes on.

Making a chart costs its process Altair's import (~0.25 s), vl-convert's first rendering (~0.35 s: the
JavaScript engine starts) and then ~0.1-0.3 s a chart (the Altair objects and the SVG). Inside
``tracehouse build`` every step runs in one process, one after the other, so the chart assets only
query their rows and hand them to one worker process (started at the first chart to make, warmed up
at once), which builds the specs and renders the SVGs (and PNGs) on the other core while the build
computes the marts and the failure views; the dashboard page's step collects the results and writes
the files (:func:`pipelines.storage.write_atomic`, in the build's process).

The worker is a plain ``python -c`` child speaking one JSON object a line over its stdin and stdout
(no pickling, and it never re-imports the caller's main module); it imports only what a chart needs
(Altair, vl-convert, ``dashboards.charts``), not DuckDB or Dagster, and it ends when its stdin closes
(the build's end, or its death). Nothing from the data decides what runs: a request names one of our
charts and carries its rows as JSON values. A ``tracehouse watch`` process keeps its worker, warm,
from one build to the next. Should the worker fail, the page's step makes the chart itself.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import itertools
import json
import os
import subprocess
import sys
import threading
import traceback
from concurrent.futures import Future
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


class WorkerFailed(RuntimeError):
    """The worker process ended before it answered."""


class Worker:
    """One worker process and the answers it owes."""

    def __init__(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from dashboards.chart_worker import serve; serve()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO, env=env,
            text=True, encoding="utf-8", bufsize=1,
        )
        self.pending: dict[int, Future] = {}
        self.ids = itertools.count()
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, name="chart-worker-reader", daemon=True)
        self.reader.start()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def submit(self, request: dict[str, Any]) -> Future:
        future: Future = Future()
        with self.lock:
            key = next(self.ids)
            self.pending[key] = future
        try:
            self.proc.stdin.write(json.dumps({"id": key, **request}, default=str) + "\n")
            self.proc.stdin.flush()
        except (OSError, ValueError) as exc:  # the worker is gone
            with self.lock:
                self.pending.pop(key, None)
            future.set_exception(WorkerFailed(f"the chart worker is gone ({exc})"))
        return future

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                answer = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                future = self.pending.pop(answer.get("id"), None)
            if future is None:
                continue
            if answer.get("error"):
                future.set_exception(RuntimeError(answer["error"]))
            else:
                future.set_result(answer)
        with self.lock:
            left, self.pending = list(self.pending.values()), {}
        for future in left:
            future.set_exception(WorkerFailed("the chart worker ended before it answered"))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


_LOCK = threading.Lock()
_WORKER: Worker | None = None
PENDING: dict[str, Future] = {}  # chart file stem -> the worker's answer


def worker() -> Worker:
    global _WORKER
    with _LOCK:
        if _WORKER is None or not _WORKER.alive():
            _WORKER = Worker()
            atexit.register(shutdown)
        return _WORKER


def shutdown() -> None:
    global _WORKER
    with _LOCK:
        if _WORKER is not None:
            _WORKER.close()
            _WORKER = None


def submit(stem: str, name: str, rows: list[dict], inputs: str, vl_version: str | None, png: bool,
           validate: bool, png_scale: float) -> Future:
    """Ask the worker for a chart's files (answered: {"spec": text, "svg": text, "png": bytes or None})."""
    future = worker().submit({"name": name, "rows": rows, "inputs": inputs, "vl_version": vl_version,
                              "png": png, "validate": validate, "png_scale": png_scale})
    PENDING[stem] = future
    return future


def take(stem: str) -> Future | None:
    """The pending answer for a chart's files (no longer pending), if there is one."""
    return PENDING.pop(stem, None)


# -- in the worker ------------------------------------------------------------------------------


def render(name: str, rows: list[dict], inputs: str, vl_version: str | None, png: bool, validate: bool,
           png_scale: float) -> dict[str, Any]:
    """A chart's spec (JSON text), SVG and, with ``png``, PNG (base64)."""
    import vl_convert as vlc

    from dashboards.charts import CHARTS, linked

    spec = linked(CHARTS[name].build(rows)).to_dict(validate=validate) | {"usermeta": {"tracehouse_inputs": inputs}}
    out: dict[str, Any] = {
        "spec": json.dumps(spec, ensure_ascii=False, indent=1),
        "svg": vlc.vegalite_to_svg(spec, vl_version=vl_version),
        "png": None,
    }
    if png:
        out["png"] = base64.b64encode(vlc.vegalite_to_png(spec, vl_version=vl_version, scale=png_scale)).decode()
    return out


def serve() -> None:
    """The worker's loop: warm up, then answer one request a line until stdin closes."""
    import altair  # noqa: F401
    import vl_convert as vlc

    import dashboards.charts  # noqa: F401

    vlc.vegalite_to_svg({"mark": "point", "data": {"values": []}})  # start the JavaScript engine now
    out = sys.stdout
    for line in sys.stdin:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        key = request.pop("id", None)
        try:
            answer = {"id": key, **render(**request)}
        except Exception:  # noqa: BLE001 - reported to the build, which fails that chart's step
            answer = {"id": key, "error": traceback.format_exc(limit=8)}
        out.write(json.dumps(answer) + "\n")
        out.flush()


def decode_png(answer: dict[str, Any]) -> bytes | None:
    return base64.b64decode(answer["png"]) if answer.get("png") else None
