"""``tracehouse collect``: an OTLP/HTTP trace receiver that lands what it accepts in the warehouse.

Instrumented programs (any OpenTelemetry SDK's OTLP/HTTP exporter, an OpenTelemetry Collector)
``POST /v1/traces`` an ``ExportTraceServiceRequest``, as protobuf (``application/x-protobuf``) or
OTLP/JSON (``application/json``), optionally gzip-compressed. Each accepted request becomes one
line of OTLP/JSON (ids as hex, enums as integers: the OTLP/JSON encoding) appended to a file of the
warehouse's landing folder (``<warehouse>/collected/``), and is acknowledged (200) only once that
line is written and fsynced: what a client was told is kept survives a crash of the receiver or of
the machine. Concurrent requests share one fsync (group commit: one writer thread writes whatever
arrived while the previous fsync ran, in one write).

The folder is recorded as the warehouse's source ``collected`` (kind ``otlp``) as the receiver starts
(pipelines.config.add_source), so ``tracehouse build``, ``tracehouse watch`` and the Dagster sensor
read it with the warehouse's other sources. Files are named by the UTC time they were opened,
``<YYYYMMDDTHHMMSSZ>-<pid>-<n>.jsonl``: path order is arrival order (a trace's ``graphs.file`` is
the file its first spans landed in). A file is first written as ``.jsonl.part`` and renamed once its
first line is on disk, then appended to until it holds ``--roll-mb`` MB or is ``--roll-seconds``
old; a build reads the lines complete when it lists the file (pipelines.readers.otlp.IncompleteLine),
and a later build the lines added since.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hmac
import ipaddress
import os
import signal
import socket
import sys
import threading
import time
import zlib
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TextIO

import orjson
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from pipelines.config import Source, add_source, from_recorded
from pipelines.errors import ConfigError
from pipelines.state import CommitLog
from pipelines.storage import Warehouse

SOURCE_NAME = "collected"
SOURCE_KIND = "otlp"
LANDING = "collected"  # the landing folder, under the warehouse
TRACES_PATH = "/v1/traces"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4318  # OTLP/HTTP's port
DEFAULT_MAX_BODY_MB = 20.0  # as the OpenTelemetry Collector's otlp receiver (max_request_body_size)
DEFAULT_ROLL_MB = 64.0
DEFAULT_ROLL_SECONDS = 3600.0
TOKEN_ENV = "TRACEHOUSE_COLLECT_TOKEN"
STOP_SECONDS = 30.0  # how long requests under way get to finish once asked to stop
IDLE_SECONDS = 120.0  # a connection silent this long is closed
PROTOBUF = "application/x-protobuf"
JSON = "application/json"


class Rejected(Exception):
    """A request answered with an error status and a reason (nothing of it is kept)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class LandingFailed(OSError):
    """The landing file could not be written or fsynced: the requests of that group get 503."""


# -- decoding ------------------------------------------------------------------------------------------


def decompress(body: bytes, encoding: str, limit: int) -> bytes:
    """The body as sent before ``Content-Encoding`` (gzip, deflate or none), refusing (413) one that
    inflates past ``limit`` bytes before it is all in memory."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "deflate"):
        raise Rejected(415, f"unsupported Content-Encoding {encoding!r} (use gzip, deflate or none)")
    inflater = zlib.decompressobj(wbits=31 if encoding == "gzip" else 15)
    try:
        data = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise Rejected(400, f"the {encoding} body is broken: {exc}") from None
    if len(data) > limit or inflater.unconsumed_tail:
        raise Rejected(413, f"the body inflates to more than {limit} bytes (--max-body-mb)")
    if not inflater.eof:
        raise Rejected(400, f"the {encoding} body is truncated")
    return data


def _hex(value: str) -> str:
    return base64.b64decode(value).hex()


def otlp_json(message: Any) -> dict[str, Any]:
    """An ``ExportTraceServiceRequest`` message as OTLP/JSON: protobuf's JSON mapping with enums as
    integers, then trace and span ids as hex (protobuf's mapping writes bytes as base64; OTLP/JSON,
    and the Collector, want hex)."""
    request = MessageToDict(message, use_integers_for_enums=True)
    for rs in request.get("resourceSpans", ()):
        for ss in rs.get("scopeSpans", ()):
            for span in ss.get("spans", ()):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = _hex(span[key])
                for link in span.get("links", ()):
                    for key in ("traceId", "spanId"):
                        if key in link:
                            link[key] = _hex(link[key])
    return request


def decode(body: bytes, content_type: str) -> tuple[bytes, int]:
    """One OTLP/JSON line (no newline inside, one at the end) for a request body, and its number of
    spans; :class:`Rejected` (400, 415) with the reason for one that is not an ExportTraceServiceRequest."""
    media = content_type.split(";")[0].strip().lower()
    if media == PROTOBUF:
        try:
            message = ExportTraceServiceRequest.FromString(body)
        except DecodeError as exc:
            raise Rejected(400, f"the body is not a protobuf ExportTraceServiceRequest: {exc}") from None
        n_spans = sum(len(ss.spans) for rs in message.resource_spans for ss in rs.scope_spans)
        return orjson.dumps(otlp_json(message)) + b"\n", n_spans
    if media == JSON:
        try:
            request = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise Rejected(400, f"the body is not JSON: {exc}") from None
        return orjson.dumps(request) + b"\n", _json_spans(request)
    raise Rejected(415, f"unsupported Content-Type {content_type!r} (use {PROTOBUF} or {JSON})")


def _json_spans(request: Any) -> int:
    """The number of spans of an OTLP/JSON request, checking its shape down to the span lists (what
    is inside a span the build checks, putting a bad one in ingest_errors)."""
    if not isinstance(request, dict):
        raise Rejected(400, f"expected an ExportTraceServiceRequest object, got a JSON {type(request).__name__}")
    resource_spans = request.get("resourceSpans", request.get("resource_spans", []))
    if not isinstance(resource_spans, list):
        raise Rejected(400, "resourceSpans must be a list")
    n = 0
    for i, rs in enumerate(resource_spans):
        scope_spans = rs.get("scopeSpans", rs.get("scope_spans", [])) if isinstance(rs, dict) else None
        if not isinstance(scope_spans, list):
            raise Rejected(400, f"resourceSpans[{i}] must be an object whose scopeSpans is a list")
        for j, ss in enumerate(scope_spans):
            spans = ss.get("spans", []) if isinstance(ss, dict) else None
            if not isinstance(spans, list):
                raise Rejected(400, f"resourceSpans[{i}].scopeSpans[{j}] must be an object whose spans is a list")
            n += len(spans)
    return n


# -- landing: group commit ------------------------------------------------------------------------------


@dataclass
class _Pending:
    data: bytes
    done: threading.Event = field(default_factory=threading.Event)
    error: OSError | None = None


class Landing:
    """The landing folder's writer: :meth:`append` returns once the line is written and fsynced (or
    raises :class:`LandingFailed`); one thread writes and fsyncs for every request waiting."""

    def __init__(self, folder: Path, roll_bytes: int, roll_seconds: float) -> None:
        self.folder = folder
        self.roll_bytes, self.roll_seconds = roll_bytes, roll_seconds
        folder.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(folder / ".collect.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise LandingFailed(f"another tracehouse collect is writing to {folder}") from None
        self.repaired = self._repair()
        self._fd: int | None = None
        self._path: Path | None = None
        self._size = 0
        self._opened = 0.0
        self._serial = 0
        self._queue: list[_Pending] = []
        self._cond = threading.Condition()
        self._closing = False
        self.files = 0
        self.fsyncs = 0
        self._thread = threading.Thread(target=self._run, name="landing-writer", daemon=True)
        self._thread.start()

    def _repair(self) -> list[str]:
        """Cut what a crash left half-written (never acknowledged: an acknowledged line ends in a
        newline and was fsynced) from the end of earlier files, and finish their renames."""
        repaired = []
        for path in sorted(self.folder.glob("*.jsonl*")):
            if path.suffix not in (".jsonl", ".part"):
                continue
            data = path.read_bytes()
            end = data.rfind(b"\n") + 1
            if end != len(data):
                with open(path, "r+b") as f:
                    f.truncate(end)
                    os.fsync(f.fileno())
                repaired.append(path.name)
            if path.suffix == ".part":
                if end:
                    os.replace(path, path.with_suffix(""))
                else:
                    path.unlink()
        if repaired:
            _fsync_dir(self.folder)
        return repaired

    def append(self, data: bytes) -> None:
        pending = _Pending(data)
        with self._cond:
            if self._closing:
                raise LandingFailed("the receiver is stopping")
            self._queue.append(pending)
            self._cond.notify()
        pending.done.wait()
        if pending.error is not None:
            raise LandingFailed(f"could not land the request in {self.folder}: {pending.error}") from pending.error

    def close(self) -> None:
        """Write what is waiting, then stop the writer and close the file (already fsynced)."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        os.close(self._lock_fd)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                group, self._queue = self._queue, []
            if not group:
                return
            error: OSError | None = None
            try:
                self._write(b"".join(p.data for p in group))
            except Exception as exc:  # noqa: BLE001 - the group gets 503; the writer stays up for the next one
                error = exc if isinstance(exc, OSError) else OSError(f"{type(exc).__name__}: {exc}")
                self._abandon()
            for pending in group:
                pending.error = error
                pending.done.set()

    def _write(self, data: bytes) -> None:
        if self._fd is not None and (self._size >= self.roll_bytes or
                                     time.monotonic() - self._opened >= self.roll_seconds):
            os.close(self._fd)
            self._fd = None
        fresh = self._fd is None
        if fresh:
            self._serial += 1
            name = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}-{self._serial:06d}.jsonl"
            self._path = self.folder / name
            self._fd = os.open(self._path.with_name(name + ".part"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            self._size, self._opened = 0, time.monotonic()
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        os.fdatasync(self._fd)
        if fresh:  # the file is listed (by its .jsonl name) only once its first lines are on disk
            os.replace(self._path.with_name(self._path.name + ".part"), self._path)
            _fsync_dir(self.folder)
            self.files += 1
        self._size += len(data)
        self.fsyncs += 1

    def _abandon(self) -> None:
        """After a failed write: cut the file back to its last acknowledged line and start another
        with the next group, so no acknowledged line is ever glued to a half-written one."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, self._size)
            os.fsync(self._fd)
        with contextlib.suppress(OSError):
            os.close(self._fd)
        part = self._path.with_name(self._path.name + ".part") if self._path else None
        if part is not None and part.exists() and self._size == 0:
            with contextlib.suppress(OSError):
                part.unlink()
        self._fd = None


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- the HTTP receiver ----------------------------------------------------------------------------------


@dataclass
class Counters:
    requests: int = 0
    spans: int = 0
    bytes: int = 0
    rejected: int = 0
    failed: int = 0
    in_flight: int = 0


class Receiver:
    """What each request is checked against and where it lands; shared by the handler threads."""

    def __init__(self, landing: Landing, token: str | None, max_body: int, log: TextIO = sys.stderr) -> None:
        self.landing = landing
        self.token = token
        self.max_body = max_body
        self.log = log
        self.counters = Counters()
        self.stopping = False
        self._cond = threading.Condition()

    def say(self, line: str) -> None:
        print(f"tracehouse collect: {line}", file=self.log, flush=True)

    def handle(self, handler: _Handler) -> None:
        with self._cond:
            self.counters.in_flight += 1
        try:
            self._handle(handler)
        except Rejected as exc:
            with self._cond:
                self.counters.rejected += 1
            handler.reply_error(exc.status, exc.reason)
        except LandingFailed as exc:
            with self._cond:
                self.counters.failed += 1
            self.say(f"503: {exc}")
            handler.reply_error(503, str(exc), retry_after=True)
        except Exception as exc:  # noqa: BLE001 - one request's bug answers it alone; the receiver stays up
            self.say(f"500: {type(exc).__name__}: {exc}")
            handler.reply_error(500, f"{type(exc).__name__}: {exc}")
        finally:
            with self._cond:
                self.counters.in_flight -= 1
                self._cond.notify_all()

    def _handle(self, handler: _Handler) -> None:
        path = handler.path.split("?", 1)[0]
        if path != TRACES_PATH:
            handler.close_connection = True  # the body, if any, is not read
            raise Rejected(404, f"no such path {path!r}: traces are POSTed to {TRACES_PATH}")
        if self.token is not None:
            given = handler.headers.get("Authorization", "")
            scheme, _, value = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), self.token.encode()):
                handler.close_connection = True
                raise Rejected(401, "a bearer token is required (Authorization: Bearer <token>)" if not given
                               else "the bearer token is wrong")
        if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
            handler.close_connection = True
            raise Rejected(411, "send the body with a Content-Length (chunked bodies are not read)")
        try:
            length = int(handler.headers.get("Content-Length", ""))
        except ValueError:
            handler.close_connection = True
            raise Rejected(411, "a Content-Length header is required") from None
        if length < 0:
            handler.close_connection = True
            raise Rejected(400, "a negative Content-Length")
        if length > self.max_body:
            handler.close_connection = True
            raise Rejected(413, f"the body is {length} bytes, over the limit of {self.max_body} (--max-body-mb)")
        body = handler.rfile.read(length)
        if len(body) != length:
            handler.close_connection = True
            raise Rejected(400, f"the body ended after {len(body)} of {length} bytes")
        body = decompress(body, handler.headers.get("Content-Encoding", ""), self.max_body)
        content_type = handler.headers.get("Content-Type", "")
        line, n_spans = decode(body, content_type)
        if self.stopping:
            raise LandingFailed("the receiver is stopping")
        if n_spans:
            self.landing.append(line)
        with self._cond:
            self.counters.requests += 1
            self.counters.spans += n_spans
            self.counters.bytes += len(line) if n_spans else 0
        if content_type.split(";")[0].strip().lower() == PROTOBUF:
            handler.reply(200, b"", PROTOBUF)  # an empty ExportTraceServiceResponse: everything accepted
        else:
            handler.reply(200, b"{}", JSON)

    def wait_idle(self, seconds: float) -> bool:
        """Wait until no request is under way (True), or ``seconds`` have passed (False)."""
        deadline = time.monotonic() + seconds
        with self._cond:
            while self.counters.in_flight:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: an exporter posts every batch on one connection
    timeout = IDLE_SECONDS  # a connection silent this long (idle, or a body that stops coming) is closed
    server_version = "tracehouse-collect"
    server: _Server

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.server.receiver.handle(self)

    def _not_post(self) -> None:
        path = self.path.split("?", 1)[0]
        self.close_connection = True
        if path == TRACES_PATH:
            self.reply_error(405, f"{self.command} is not allowed: POST an ExportTraceServiceRequest",
                             extra={"Allow": "POST"})
        else:
            self.reply_error(404, f"no such path {path!r}: traces are POSTed to {TRACES_PATH}")

    do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = _not_post  # noqa: N815

    def reply(self, status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def reply_error(self, status: int, reason: str, retry_after: bool = False,
                    extra: dict[str, str] | None = None) -> None:
        """The status and, as JSON, a google.rpc.Status-shaped body naming the reason."""
        headers = dict(extra or {})
        if retry_after:
            headers["Retry-After"] = "5"
        if status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="tracehouse collect"'
        code = {400: 3, 401: 16, 404: 5, 405: 12, 411: 3, 413: 8, 415: 3, 503: 14}.get(status, 13)
        with contextlib.suppress(OSError):
            self.reply(status, orjson.dumps({"code": code, "message": reason}), JSON, headers)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        """Requests are counted, not logged one line each (errors are said by the receiver)."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # an idle keep-alive connection does not hold the exit
    receiver: Receiver

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that broke (a client gone mid-request) is that client's affair, said in one line."""
        exc = sys.exception()
        self.receiver.say(f"connection from {client_address[0]}: {type(exc).__name__}: {exc}")


class _Server6(_Server):
    address_family = socket.AF_INET6


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# -- the command ----------------------------------------------------------------------------------------


@dataclass
class CollectOptions:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str | None = None
    max_body_mb: float = DEFAULT_MAX_BODY_MB
    roll_mb: float = DEFAULT_ROLL_MB
    roll_seconds: float = DEFAULT_ROLL_SECONDS


class Collector:
    """A running receiver: :meth:`start` records the landing folder as the warehouse's ``collected``
    source, opens it and listens (requests are served on threads of their own); :meth:`stop`
    finishes the requests under way and closes the landing file (everything acknowledged is on disk)."""

    def __init__(self, warehouse: Path, options: CollectOptions, log: TextIO = sys.stderr) -> None:
        self.warehouse = Path(warehouse).absolute()
        self.options = options
        self.log = log
        self.folder = self.warehouse / LANDING
        self.url = ""
        self.receiver: Receiver | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Collector:
        for entry in (record.sources if (record := CommitLog(Warehouse(self.warehouse)).latest()) else []):
            if entry["name"] == SOURCE_NAME and (entry["kind"] != SOURCE_KIND or
                                                 from_recorded(entry, self.warehouse).path != self.folder.resolve()):
                raise ConfigError(f"the warehouse already has a source named {SOURCE_NAME!r} ({entry['kind']} at "
                                  f"{entry['absolute']}); rename it (build --source NAME:KIND=PATH with "
                                  f"--remove-source {SOURCE_NAME}) to collect into {self.folder}")
        options = self.options
        landing = Landing(self.folder, int(options.roll_mb * 1024 * 1024), options.roll_seconds)
        try:
            receiver = Receiver(landing, options.token, int(options.max_body_mb * 1024 * 1024), self.log)
            server_class = _Server6 if ":" in options.host else _Server
            try:
                server = server_class((options.host, options.port), _Handler)
            except OSError as exc:
                raise LandingFailed(f"cannot listen on {options.host}:{options.port}: {exc}") from None
            try:  # recorded once the receiver can listen: the next build reads the folder
                add_source(Source(SOURCE_NAME, SOURCE_KIND, self.folder.resolve()), self.warehouse)
            except BaseException:
                server.server_close()
                raise
            if landing.repaired:
                receiver.say(f"cut the unacknowledged half-written end off {', '.join(landing.repaired)}")
        except BaseException:
            landing.close()
            raise
        server.receiver = receiver
        self.receiver, self._server = receiver, server
        host, port = server.server_address[:2]
        self.url = f"http://{f'[{host}]' if ':' in host else host}:{port}{TRACES_PATH}"
        if not is_loopback(options.host):
            receiver.say(f"WARNING: listening on {options.host}, reachable from other machines; spans carry prompts "
                         "and outputs" + ("" if options.token else ": set a token (--token or $" + TOKEN_ENV + ")"))
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="collect-http", daemon=True)
        self._thread.start()
        receiver.say(f"listening on {self.url} (OTLP/HTTP, protobuf or JSON"
                     f"{', bearer token required' if options.token else ''}); landing in {self.folder.resolve()} "
                     f"(source {SOURCE_NAME}, kind {SOURCE_KIND}, of warehouse {self.warehouse})")
        return self

    def status(self) -> str:
        c, landing = self.receiver.counters, self.receiver.landing
        return (f"{c.requests} requests, {c.spans} spans landed in {landing.files} files with {landing.fsyncs} "
                f"fsyncs ({c.rejected} rejected, {c.failed} not written)")

    def stop(self) -> None:
        receiver, server = self.receiver, self._server
        if receiver is None or server is None:
            return
        receiver.say("stopping: finishing the requests under way")
        server.shutdown()  # no new connections
        receiver.stopping = True  # a request on a kept-alive connection now gets 503
        idle = receiver.wait_idle(STOP_SECONDS)
        server.server_close()
        receiver.landing.close()
        self._server = None
        receiver.say(f"stopped: {self.status()}" + ("" if idle else "; requests still under way were dropped"))

    def __enter__(self) -> Collector:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(warehouse: Path, options: CollectOptions, log: TextIO = sys.stderr) -> int:
    """``tracehouse collect``: receive until SIGTERM or SIGINT, then finish the requests under way and
    return 0 (a progress line every 10 s while requests arrive)."""
    stop = threading.Event()
    previous = {signum: signal.signal(signum, lambda *_: stop.set()) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        with Collector(warehouse, options, log) as collector:
            last = collector.status()
            while not stop.wait(10.0):
                if (now := collector.status()) != last:
                    collector.receiver.say(now)
                    last = now
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0
