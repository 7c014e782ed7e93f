"""``tracehouse collect``: an OTLP/HTTP trace receiver that lands what it accepts in the warehouse.

Instrumented programs (any OpenTelemetry SDK's OTLP/HTTP exporter, an OpenTelemetry Collector)
``POST /v1/traces`` an ``ExportTraceServiceRequest``, as protobuf (``application/x-protobuf``) or
OTLP/JSON (``application/json``), optionally gzip-compressed. Each accepted request becomes one
line of OTLP/JSON (ids as hex, enums as integers: the OTLP/JSON encoding) appended to a file of the
warehouse's landing folder (``<warehouse>/collected/``, written by pipelines.interfaces.landing), and is
acknowledged (200) only once that line is written and fsynced: what a client was told is kept
survives a crash of the receiver or of the machine. Concurrent requests share one fsync.

Serving a crowd: one event-loop thread holds every connection (a listen backlog of ``BACKLOG``) and
reads each request whole, headers and body, within ``--request-seconds`` of its first byte (a
connection's first request: of the connection's accept); a client that trickles its bytes past that
is answered 408 and closed, having held no worker. Only whole requests reach the ``--workers``
threads, which decode them; the landing's writer fsyncs them. Past ``--max-connections`` open
connections a new one is answered 503 with ``Retry-After`` and closed, as the OpenTelemetry
Collector answers when it is full. A kept-alive connection silent ``IDLE_SECONDS`` between requests
is closed. Every answer is counted by its status: the stop line (and the status line every 10 s)
gives the requests and spans accepted and rejected.

The folder is recorded as the warehouse's source ``collected`` (kind ``otlp``) as the receiver starts
(pipelines.config.add_source), so ``tracehouse build``, ``tracehouse watch`` and the Dagster sensor
read it with the warehouse's other sources; a build reads the lines complete when it lists a file
(pipelines.readers.otlp.IncompleteLine), and a later build the lines added since.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hmac
import ipaddress
import resource
import signal
import socket
import sys
import threading
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from email.utils import formatdate
from http import HTTPStatus
from pathlib import Path
from typing import Any, TextIO

import orjson
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from pipelines.config import Source, add_source, from_recorded
from pipelines.errors import ConfigError
from pipelines.interfaces.landing import Landing, LandingFailed
from pipelines.storage.state import CommitLog
from pipelines.storage.warehouse import Warehouse

__all__ = ["CollectOptions", "Collector", "Landing", "LandingFailed", "Rejected", "serve"]

SOURCE_NAME = "collected"
SOURCE_KIND = "otlp"
LANDING = "collected"  # the landing folder, under the warehouse
TRACES_PATH = "/v1/traces"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4318  # OTLP/HTTP's port
DEFAULT_MAX_BODY_MB = 20.0  # as the OpenTelemetry Collector's otlp receiver (max_request_body_size)
DEFAULT_ROLL_MB = 64.0
DEFAULT_ROLL_SECONDS = 3600.0
DEFAULT_WORKERS = 8  # threads decoding whole requests; waiting for a client or for the fsync holds none
DEFAULT_MAX_CONNECTIONS = 1024
DEFAULT_REQUEST_SECONDS = 60.0  # a whole request, headers and body (20 MB at 0.35 MB/s)
BACKLOG = 4096  # connections the kernel queues before they are accepted (capped by net.core.somaxconn)
TOKEN_ENV = "TRACEHOUSE_COLLECT_TOKEN"
STOP_SECONDS = 30.0  # how long requests under way get to finish once asked to stop
IDLE_SECONDS = 120.0  # a kept-alive connection silent this long between requests is closed
# After an answer that closes a connection whose request was not read (401, 413, 503 past the cap...),
# what the client still sends is read and dropped this long: closing a socket with unread data
# resets the connection, and the client may then never read the answer.
LINGER_SECONDS = 2.0
RETRY_AFTER_SECONDS = 5
MAX_HEAD = 64 * 1024  # the request line and headers
READ_BUFFER = 1024 * 1024  # a connection's read buffer: a body arrives in few, large reads
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
SERVER = "tracehouse-collect"
# google.rpc.Code of an answer's status, as OTLP/HTTP's error bodies carry it (13: INTERNAL)
RPC_CODES = {400: 3, 401: 16, 404: 5, 405: 12, 408: 4, 411: 3, 413: 8, 415: 3, 431: 8, 503: 14}


class Rejected(Exception):
    """A request answered with an error status and a reason (nothing of it is kept); ``close``: the
    connection is closed after the answer (its body, if any, was not read)."""

    def __init__(self, status: int, reason: str, close: bool = False, headers: dict[str, str] | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.close = close
        self.headers = headers or {}


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


# -- the HTTP receiver ----------------------------------------------------------------------------------


@dataclass
class Counters:
    """What the receiver answered, kept by its event loop's thread."""

    requests: int = 0  # answered 200
    spans: int = 0  # in the requests answered 200
    bytes: int = 0  # of OTLP/JSON landed
    rejected: dict[int, int] = field(default_factory=dict)  # status -> requests answered with it
    decoded_rejected: int = 0  # rejected requests whose spans were counted (decoded, then not written)
    rejected_spans: int = 0  # in those
    dropped: int = 0  # requests whose client closed the connection before they were whole: no answer

    def reject(self, status: int, spans: int | None = None) -> None:
        self.rejected[status] = self.rejected.get(status, 0) + 1
        if spans is not None:
            self.decoded_rejected += 1
            self.rejected_spans += spans

    def line(self) -> str:
        """The counts in one line: requests and spans accepted and rejected, rejections by status."""
        n_rejected = sum(self.rejected.values())
        by_status = ", ".join(f"{n} x {status}" for status, n in sorted(self.rejected.items()))
        text = f"requests: {self.requests:,} accepted, {n_rejected:,} rejected"
        text += (f" ({by_status})" if by_status else "") + f"; spans: {self.spans:,} accepted"
        if self.decoded_rejected:
            text += (f", {self.rejected_spans:,} rejected (in the {self.decoded_rejected:,} rejected "
                     f"request{'s' if self.decoded_rejected != 1 else ''} that were decoded)")
        elif n_rejected:
            text += " (no rejected request was decoded: their spans are not counted)"
        if self.dropped:
            text += f"; {self.dropped:,} request{'s' if self.dropped != 1 else ''} cut short by the client, unanswered"
        return text


@dataclass
class Request:
    method: str
    path: str
    version: str
    headers: dict[str, str]  # names in lower case

    def header(self, name: str) -> str:
        return self.headers.get(name, "")


def parse_head(head: bytes) -> Request:
    """The request line and headers (ending in an empty line) of an HTTP/1.x request; :class:`Rejected`
    (400) for one that is not."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise Rejected(400, f"not an HTTP/1.x request line: {lines[0][:100]!r}", close=True)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            raise Rejected(400, f"a malformed header line: {line[:100]!r}", close=True)
        name, value = name.lower(), value.strip()
        if name in headers:
            if name == "content-length" and headers[name] != value:
                raise Rejected(400, "two different Content-Length headers", close=True)
            value = value if name == "content-length" else f"{headers[name]}, {value}"
        headers[name] = value
    return Request(parts[0], parts[1].split("?", 1)[0], parts[2], headers)


class Receiver:
    """The connections of one receiver, served by an asyncio event loop on a thread of its own; the
    requests' decoding on a bounded pool of worker threads; what they land, in ``landing``."""

    def __init__(self, landing: Landing, token: str | None, max_body: int, log: TextIO = sys.stderr, *,
                 workers: int = DEFAULT_WORKERS, max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 request_seconds: float = DEFAULT_REQUEST_SECONDS) -> None:
        self.landing = landing
        self.token = token
        self.max_body = max_body
        self.log = log
        self.max_connections = max_connections
        self.request_seconds = request_seconds
        self.counters = Counters()
        self.stopping = False
        self.open_connections = 0
        self.finished_in_time = True
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="collect-worker")
        self._tasks: set[asyncio.Task] = set()
        self._idle: set[asyncio.Task] = set()  # waiting for a request's first byte
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def say(self, line: str) -> None:
        print(f"tracehouse collect: {line}", file=self.log, flush=True)

    # -- the loop: listening, stopping

    def run(self, sock: socket.socket, ready: threading.Event) -> None:
        """Serve ``sock`` until :meth:`request_stop`; then finish the requests under way (for up to
        ``STOP_SECONDS``) and close every connection. On the receiver's own thread."""
        loop = asyncio.new_event_loop()
        loop.set_exception_handler(lambda _loop, context: self.say(
            f"{context.get('message')}: {context.get('exception')!r}"))
        self._loop = loop
        try:
            loop.run_until_complete(self._serve(sock, ready))
        finally:
            loop.close()
            self._pool.shutdown(wait=True)

    def request_stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)

    async def _serve(self, sock: socket.socket, ready: threading.Event) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._connection, sock=sock, backlog=BACKLOG, limit=READ_BUFFER)
        ready.set()
        await self._stop.wait()
        server.close()  # no new connections
        self.stopping = True  # a request that starts now is answered 503
        loop = asyncio.get_running_loop()
        end = loop.time() + STOP_SECONDS
        while busy := [task for task in self._tasks if task not in self._idle]:
            if (left := end - loop.time()) <= 0:
                self.finished_in_time = False
                break
            await asyncio.wait(busy, timeout=left)
        for task in list(self._tasks):  # idle kept-alive connections (and, past STOP_SECONDS, the rest)
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- one connection

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._tasks.add(task)
        served = self.open_connections < self.max_connections
        self.open_connections += served
        try:
            if served:
                await self._requests(reader, writer)
            else:  # answered at once, before its request is read: it holds nothing for long
                self.counters.reject(503)
                await self._answer_error(writer, Rejected(
                    503, f"{self.max_connections} connections are open (--max-connections): retry later",
                    close=True), head_only=False)
                await self._linger(reader, writer)
        except (asyncio.CancelledError, ConnectionError, TimeoutError):
            pass  # stopped, or the client went away: nothing to answer
        except Exception as exc:  # noqa: BLE001 - one connection's bug ends it alone; the receiver stays up
            self.say(f"connection ended by {type(exc).__name__}: {exc}")
        finally:
            self.open_connections -= served
            self._tasks.discard(task)
            self._idle.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """The requests of one connection, one after the other, until it is closed."""
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        first_request = True
        while True:
            # the first request's deadline runs from the accept; a later one's from its first byte
            deadline = loop.time() + self.request_seconds
            self._idle.add(task)
            try:
                async with asyncio.timeout(self.request_seconds if first_request else IDLE_SECONDS):
                    first = await reader.read(1)
            except TimeoutError:
                return  # nothing asked: closed without an answer
            finally:
                self._idle.discard(task)
            if not first:
                return
            if not first_request:
                deadline = loop.time() + self.request_seconds
            first_request = False
            if not await self._request(first, reader, writer, deadline):
                return

    async def _request(self, first: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       deadline: float) -> bool:
        """Read, check, decode and land one request and answer it; whether the connection stays open."""
        request: Request | None = None
        try:
            async with asyncio.timeout_at(deadline):
                head = (first + await reader.readuntil(b"\r\n\r\n")).lstrip(b"\r\n")
                if len(head) > MAX_HEAD:
                    raise asyncio.LimitOverrunError("the request's headers are too long", len(head))
                request = parse_head(head)
                length = self._check(request)
                if request.header("expect").lower() == "100-continue":
                    writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                body = await reader.readexactly(length)
        except TimeoutError:
            self.counters.reject(408)
            await self._answer_error(writer, Rejected(
                408, f"the request was not whole within {self.request_seconds:g} s (--request-seconds)", close=True))
            await self._linger(reader, writer)
            return False
        except asyncio.LimitOverrunError:
            self.counters.reject(431)
            await self._answer_error(writer, Rejected(431, f"the request's headers exceed {MAX_HEAD} bytes",
                                                      close=True))
            await self._linger(reader, writer)
            return False
        except (asyncio.IncompleteReadError, ConnectionError):
            self.counters.dropped += 1
            return False
        except Rejected as exc:
            self.counters.reject(exc.status)
            await self._answer_error(writer, exc, head_only=request is not None and request.method == "HEAD")
            await self._linger(reader, writer)
            return False
        keep_alive = request.version == "HTTP/1.1" and "close" not in request.header("connection").lower()
        n_spans: int | None = None
        try:
            line, n_spans, landed = await asyncio.get_running_loop().run_in_executor(
                self._pool, self._decode_and_submit, body, request.header("content-encoding"),
                request.header("content-type"))
            if landed is not None:
                await asyncio.wrap_future(landed)
        except Rejected as exc:
            self.counters.reject(exc.status)
            await self._answer_error(writer, exc, close=not keep_alive)
            return keep_alive
        except LandingFailed as exc:
            self.counters.reject(503, n_spans)
            self.say(f"503: {exc}")
            await self._answer_error(writer, Rejected(503, str(exc)), close=not keep_alive)
            return keep_alive
        except Exception as exc:  # noqa: BLE001 - one request's bug answers it alone; the receiver stays up
            self.counters.reject(500, n_spans)
            self.say(f"500: {type(exc).__name__}: {exc}")
            await self._answer_error(writer, Rejected(500, f"{type(exc).__name__}: {exc}"), close=not keep_alive)
            return keep_alive
        self.counters.requests += 1
        self.counters.spans += n_spans
        self.counters.bytes += len(line) if n_spans else 0
        if request.header("content-type").split(";")[0].strip().lower() == PROTOBUF:
            await self._answer(writer, 200, b"", PROTOBUF, close=not keep_alive)  # an empty ExportTraceServiceResponse
        else:
            await self._answer(writer, 200, b"{}", JSON, close=not keep_alive)
        return keep_alive

    def _decode_and_submit(self, body: bytes, encoding: str, content_type: str
                           ) -> tuple[bytes, int, Future[None] | None]:
        """On a worker: the request's line, its number of spans, and the landing's future for it (none
        for a request of no spans)."""
        line, n_spans = decode(decompress(body, encoding, self.max_body), content_type)
        return line, n_spans, self.landing.submit(line) if n_spans else None

    def _check(self, request: Request) -> int:
        """The body's length, once the request line and headers allow reading it; else :class:`Rejected`
        (the connection is then closed: its body is not read)."""
        if request.method != "POST":
            if request.path == TRACES_PATH:
                raise Rejected(405, f"{request.method} is not allowed: POST an ExportTraceServiceRequest",
                               close=True, headers={"Allow": "POST"})
            raise Rejected(404, f"no such path {request.path!r}: traces are POSTed to {TRACES_PATH}", close=True)
        if request.path != TRACES_PATH:
            raise Rejected(404, f"no such path {request.path!r}: traces are POSTed to {TRACES_PATH}", close=True)
        if self.token is not None:
            given = request.header("authorization")
            scheme, _, value = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), self.token.encode()):
                raise Rejected(401, "a bearer token is required (Authorization: Bearer <token>)" if not given
                               else "the bearer token is wrong", close=True)
        if request.header("transfer-encoding"):
            raise Rejected(411, "send the body with a Content-Length (chunked bodies are not read)", close=True)
        try:
            length = int(request.header("content-length"))
        except ValueError:
            raise Rejected(411, "a Content-Length header is required", close=True) from None
        if length < 0:
            raise Rejected(400, "a negative Content-Length", close=True)
        if length > self.max_body:
            raise Rejected(413, f"the body is {length} bytes, over the limit of {self.max_body} (--max-body-mb)",
                           close=True)
        if self.stopping:
            raise Rejected(503, "the receiver is stopping", close=True)
        return length

    # -- answers

    async def _answer(self, writer: asyncio.StreamWriter, status: int, body: bytes, content_type: str,
                      close: bool, headers: dict[str, str] | None = None, head_only: bool = False) -> None:
        lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", f"Server: {SERVER}",
                 f"Date: {formatdate(usegmt=True)}", f"Content-Type: {content_type}", f"Content-Length: {len(body)}",
                 *(f"{key}: {value}" for key, value in (headers or {}).items())]
        if close:
            lines.append("Connection: close")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head_only else body))
        async with asyncio.timeout(self.request_seconds):  # a client that reads no answer holds nothing for long
            await writer.drain()

    async def _answer_error(self, writer: asyncio.StreamWriter, rejected: Rejected, close: bool | None = None,
                            head_only: bool = False) -> None:
        """The status and, as JSON, a google.rpc.Status-shaped body naming the reason."""
        headers = dict(rejected.headers)
        if rejected.status == 503:
            headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
        if rejected.status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="tracehouse collect"'
        code = RPC_CODES.get(rejected.status, 13)
        with contextlib.suppress(OSError, TimeoutError):
            await self._answer(writer, rejected.status, orjson.dumps({"code": code, "message": rejected.reason}), JSON,
                               rejected.close if close is None else close, headers, head_only)

    async def _linger(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Close for writing, then read and drop what the client still sends, for up to
        ``LINGER_SECONDS``: the answer reaches it rather than a reset."""
        with contextlib.suppress(OSError, RuntimeError, TimeoutError):
            if writer.can_write_eof():
                writer.write_eof()
            async with asyncio.timeout(LINGER_SECONDS):
                while await reader.read(65536):
                    pass


def _allow_open_files(n: int) -> None:
    """Raise this process's soft limit of open files to ``n`` (within the hard limit): each connection
    holds one, and the default soft limit is often 1024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < n:
        resource.setrlimit(resource.RLIMIT_NOFILE, (n if hard == resource.RLIM_INFINITY else min(n, hard), hard))


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
    workers: int = DEFAULT_WORKERS
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    request_seconds: float = DEFAULT_REQUEST_SECONDS


class Collector:
    """A running receiver: :meth:`start` records the landing folder as the warehouse's ``collected``
    source, opens it and listens (on a thread of its own); :meth:`stop` finishes the requests under
    way and closes the landing file (everything acknowledged is on disk)."""

    def __init__(self, warehouse: Path, options: CollectOptions, log: TextIO = sys.stderr) -> None:
        self.warehouse = Path(warehouse).absolute()
        self.options = options
        self.log = log
        self.folder = self.warehouse / LANDING
        self.url = ""
        self.receiver: Receiver | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Collector:
        for entry in (record.sources if (record := CommitLog(Warehouse(self.warehouse)).latest()) else []):
            if entry["name"] == SOURCE_NAME and (entry["kind"] != SOURCE_KIND or
                                                 from_recorded(entry, self.warehouse).path != self.folder.resolve()):
                raise ConfigError(f"the warehouse already has a source named {SOURCE_NAME!r} ({entry['kind']} at "
                                  f"{entry['absolute']}); rename it (build --source NAME:KIND=PATH with "
                                  f"--remove-source {SOURCE_NAME}) to collect into {self.folder}")
        options = self.options
        _allow_open_files(options.max_connections + 64)
        landing = Landing(self.folder, int(options.roll_mb * 1024 * 1024), options.roll_seconds)
        try:
            receiver = Receiver(landing, options.token, int(options.max_body_mb * 1024 * 1024), self.log,
                                workers=options.workers, max_connections=options.max_connections,
                                request_seconds=options.request_seconds)
            family = socket.AF_INET6 if ":" in options.host else socket.AF_INET
            try:
                sock = socket.create_server((options.host, options.port), family=family, backlog=BACKLOG)
            except OSError as exc:
                raise LandingFailed(f"cannot listen on {options.host}:{options.port}: {exc}") from None
            try:  # recorded once the receiver can listen: the next build reads the folder
                add_source(Source(SOURCE_NAME, SOURCE_KIND, self.folder.resolve()), self.warehouse)
            except BaseException:
                sock.close()
                raise
            if landing.repaired:
                receiver.say(f"cut the unacknowledged half-written end off {', '.join(landing.repaired)}")
        except BaseException:
            landing.close()
            raise
        self.receiver = receiver
        host, port = sock.getsockname()[:2]
        self.url = f"http://{f'[{host}]' if ':' in host else host}:{port}{TRACES_PATH}"
        if not is_loopback(options.host):
            receiver.say(f"WARNING: listening on {options.host}, reachable from other machines; spans carry prompts "
                         "and outputs" + ("" if options.token else ": set a token (--token or $" + TOKEN_ENV + ")"))
        ready = threading.Event()
        self._thread = threading.Thread(target=receiver.run, args=(sock, ready), name="collect-http", daemon=True)
        self._thread.start()
        while not ready.wait(0.1):
            if not self._thread.is_alive():  # the loop could not start serving: said by the thread's exception
                landing.close()
                raise LandingFailed(f"could not serve on {self.url}")
        receiver.say(f"listening on {self.url} (OTLP/HTTP, protobuf or JSON"
                     f"{', bearer token required' if options.token else ''}); landing in {self.folder.resolve()} "
                     f"(source {SOURCE_NAME}, kind {SOURCE_KIND}, of warehouse {self.warehouse})")
        return self

    def status(self) -> str:
        receiver = self.receiver
        landing = receiver.landing
        return (f"{receiver.counters.line()}; {landing.files} file{'s' if landing.files != 1 else ''}, "
                f"{landing.fsyncs} fsync{'s' if landing.fsyncs != 1 else ''}; "
                f"{receiver.open_connections} connection{'s' if receiver.open_connections != 1 else ''} open")

    def stop(self) -> None:
        receiver, thread = self.receiver, self._thread
        if receiver is None or thread is None:
            return
        self._thread = None
        receiver.say("stopping: finishing the requests under way")
        receiver.request_stop()
        thread.join()
        receiver.landing.close()
        receiver.say(f"stopped: {self.status()}" +
                     ("" if receiver.finished_in_time else "; requests still under way were dropped"))

    def __enter__(self) -> Collector:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(warehouse: Path, options: CollectOptions, log: TextIO = sys.stderr) -> int:
    """``tracehouse collect``: receive until SIGTERM or SIGINT, then finish the requests under way and
    return 0 (a status line every 10 s while the counts change)."""
    stop = threading.Event()
    previous = {signum: signal.signal(signum, lambda *_: stop.set()) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        with Collector(warehouse, options, log) as collector:
            last = collector.receiver.counters.line()
            while not stop.wait(10.0):
                if (now := collector.receiver.counters.line()) != last:
                    collector.receiver.say(collector.status())
                    last = now
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0
