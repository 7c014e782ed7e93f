"""Reader for OTLP/JSON files as the OpenTelemetry Collector's file exporter writes them: one
``ExportTraceServiceRequest`` per line (``resourceSpans[].scopeSpans[].spans[]``), ``.json`` or
``.jsonl``, optionally gzip (``.gz``). A file that is one (pretty-printed) request, or a JSON list
of requests, is read too.

The spans of one trace arrive in any number of lines and files, in any folder: the whole source is
therefore one partition (split ``traces``), its files put together trace by trace (``read_traces``),
so that no trace is cut in two; a rebuild reads again only the files holding a span of a trace that
a new, changed or deleted file touches (pipelines.builds.ingest._read_partition). A trace's graph is said
to come from the first file, in path order, holding one of its spans (``graphs.file``);
``graphs.files`` lists all of them and ``file_sha256`` digests them all
(pipelines.readers.otel.combined_sha256). The mapping itself is pipelines.readers.otel's.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from pipelines.readers.base import (
    EMPTY_FILE,
    INVALID_JSON,
    MISSING_KEY,
    NO_RECORDS,
    NOT_UTF8,
    READER_FAILURE,
    UNREADABLE,
    WRONG_FIELD_TYPE,
    WRONG_TOP_LEVEL_TYPE,
    GraphRows,
    IngestError,
    SourceFile,
    file_sha256,
    first_bad_utf8,
    list_files,
    read_bytes,
)
from pipelines.readers.otel import (
    GRAPH_PREFIX,
    Span,
    combined_sha256,
    hex_id,
    merge_spans,
    parent_span_id,
    span_kind,
    status_of,
    time_ns,
    trace_rows,
)
from pipelines.storage.warehouse import relative_name

kind = "otlp"
SPLIT = "traces"
# The files of the source are read together (pipelines.builds.ingest): a trace may be spread over several.
reads_partition = True
PATTERNS = ("**/*.json", "**/*.jsonl", "**/*.json.gz", "**/*.jsonl.gz")
_SPAN_FIELDS = {"traceId", "spanId", "parentSpanId", "name", "kind", "startTimeUnixNano", "endTimeUnixNano",
                "attributes", "events", "links", "status"}


class IncompleteLine(IngestError):
    """The last line of a JSON Lines file that does not parse and has no newline after it: a line
    still being appended (a receiver, the Collector's file exporter), or what a crash cut short before
    it was acknowledged. Noted in ``ingest_errors`` (not rejected: the file's other lines load), and
    read whole by the next build once the writer has finished it."""


def discover(root: Path, source: str) -> list[SourceFile]:
    root = root.absolute()
    if root.is_file():
        return [SourceFile(source, SPLIT, root, root.name)]
    paths = sorted({p for pattern in PATTERNS for p in list_files(root, pattern)}, key=lambda p: relative_name(root, p))
    return [SourceFile(source, SPLIT, path, relative_name(root, path)) for path in paths]


def read(file: SourceFile) -> Iterator[GraphRows | IngestError]:
    """One file on its own (the ingest reads an otlp partition with :func:`read_traces`)."""
    for _, item, _ in read_partition([file]):
        yield item


@dataclass
class ParsedFile:
    """One file's spans and problems, before its traces are put together with other files'."""

    file: SourceFile
    digest: str | None  # sha256 of its bytes; None when they could not be read
    spans: list[Span]
    problems: list[tuple[IngestError, bool]]  # in file order, each with whether it rejected something

    @property
    def graph_ids(self) -> list[str]:
        """The graphs (traces) the file holds a span of, in the order of their first span in it."""
        return list(dict.fromkeys(GRAPH_PREFIX + span.trace_id for span in self.spans))


def parse(file: SourceFile) -> ParsedFile:
    spans: list[Span] = []
    problems: list[tuple[IngestError, bool]] = []
    digest = None
    try:
        data = read_bytes(file.path)
        digest = file_sha256(data)
        for item in _file_spans(file, data):
            if isinstance(item, IngestError):
                problems.append((item, not isinstance(item, IncompleteLine)))
            else:
                spans.append(item)
    except IngestError as error:
        problems.append((error, True))
    else:
        if not spans:
            problems.append((IngestError(NO_RECORDS, "the file holds no spans"), True))
    return ParsedFile(file, digest, spans, problems)


def read_partition(files: list[SourceFile]) -> Iterator[tuple[SourceFile, GraphRows | IngestError, bool]]:
    """Every trace of ``files`` as one graph, with the file it is said to come from; and every
    problem, with its file and whether it rejected something (True) or was only noted (False)."""
    for file, item, rejected, _ in read_traces(files):
        yield file, item, rejected


def read_traces(
    files: list[SourceFile], parsed: dict[str, ParsedFile] | None = None, only: set[str] | None = None,
) -> Iterator[tuple[SourceFile, GraphRows | IngestError, bool, str | None]]:
    """:func:`read_partition`, each item with the graph id of the trace it concerns (None for a
    problem of the file itself, all of which come first). ``parsed``: files already parsed (by
    path); ``only``: the graph ids to put together (None: all), the others' spans are left out, so
    ``files`` need hold every span of these traces only."""
    parsed = parsed or {}
    traces: dict[str, list[Span]] = {}
    digests: dict[str, str] = {}
    order = {f.relpath: i for i, f in enumerate(files)}
    for file in files:
        result = parsed.get(file.relpath) or parse(file)
        if result.digest is not None:
            digests[file.relpath] = result.digest
        for error, rejected in result.problems:
            yield file, error, rejected, None
        for span in result.spans:
            if only is None or GRAPH_PREFIX + span.trace_id in only:
                traces.setdefault(span.trace_id, []).append(span)
    by_path = {f.relpath: f for f in files}
    ranked = sorted(traces.items(), key=lambda item: min(order[s.file.relpath] for s in item[1]))
    for trace_id, spans in ranked:
        gid = GRAPH_PREFIX + trace_id
        spans, repeats = merge_spans(spans)
        for file, error, rejected in repeats:
            yield file, error, rejected, gid
        paths = sorted({s.file.relpath for s in spans}, key=order.__getitem__)
        home = by_path[paths[0]]
        sha256 = digests[home.relpath] if len(paths) == 1 else combined_sha256([(p, digests[p]) for p in paths])
        try:
            graph, defects = trace_rows(trace_id, spans, home, sha256, paths)
        except IngestError as error:
            yield home, error, True, gid
            continue
        except Exception as exc:  # noqa: BLE001 - a reader bug loses this trace only, named, not the partition
            yield home, IngestError(READER_FAILURE, f"trace {trace_id}: {type(exc).__name__}: {exc}"), True, gid
            continue
        for file, defect in defects:
            yield file, defect, False, gid
        yield home, graph, False, gid


def _decompress(file: SourceFile, data: bytes) -> bytes:
    if data[:2] != b"\x1f\x8b":
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise IngestError(UNREADABLE, f"the gzip stream is broken: {exc}") from None


def _requests(file: SourceFile, data: bytes) -> Iterator[tuple[str, Any] | IngestError]:
    """(position, request) for every request of the file: the whole file as one JSON document (a
    request or a list of them) when it is one, else one per non-blank line."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if not data.strip():
        raise IngestError(EMPTY_FILE, "the file is empty")
    try:
        whole = orjson.loads(data)
    except orjson.JSONDecodeError:
        whole = None
    else:
        if isinstance(whole, list):
            for i, request in enumerate(whole):
                yield f"$[{i}]", request
        else:
            yield "$", whole
        return
    lines = data.split(b"\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield f"line {number}", orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            if number == len(lines):  # no newline after it: being written (tracehouse collect appends whole lines)
                yield IncompleteLine(INVALID_JSON, f"an incomplete last line ({exc.msg}; no newline ends it: a writer "
                                     "may be appending to the file): left for the next build", f"line {number}")
            elif "UTF-8" in exc.msg or "utf-8" in exc.msg:
                bad = first_bad_utf8(line)
                where = f"line {number}" + (f" {bad}" if bad else "")
                yield IngestError(NOT_UTF8, "the line is not valid UTF-8", where)
            else:
                yield IngestError(INVALID_JSON, exc.msg, f"line {number} column {exc.colno}")


def _list(record: dict[str, Any], key: str, position: str, *alternatives: str) -> list[Any]:
    for name in (key, *alternatives):
        value = record.get(name)
        if value is None:
            continue
        if not isinstance(value, list):
            raise IngestError(WRONG_FIELD_TYPE, f"{name} must be a list", f"{position}.{name}")
        return value
    return []


def _file_spans(file: SourceFile, data: bytes) -> Iterator[Span | IngestError]:
    data = _decompress(file, data)
    for item in _requests(file, data):
        if isinstance(item, IngestError):
            yield item
            continue
        position, request = item
        if not isinstance(request, dict):
            yield IngestError(WRONG_TOP_LEVEL_TYPE, f"expected an ExportTraceServiceRequest object, got "
                              f"{type(request).__name__}", position)
            continue
        try:
            resource_spans = _list(request, "resourceSpans", position, "resource_spans")
        except IngestError as error:
            yield error
            continue
        for i, rs in enumerate(resource_spans):
            at = f"{position}: resourceSpans[{i}]"
            if not isinstance(rs, dict):
                yield IngestError(WRONG_FIELD_TYPE, "a resourceSpans entry must be an object", at)
                continue
            try:
                resource = attributes_of((rs.get("resource") or {}).get("attributes"), f"{at}.resource.attributes")
                scope_spans = _list(rs, "scopeSpans", at, "scope_spans", "instrumentationLibrarySpans")
            except (IngestError, AttributeError) as error:
                yield error if isinstance(error, IngestError) else IngestError(
                    WRONG_FIELD_TYPE, "resource must be an object", f"{at}.resource")
                continue
            for j, ss in enumerate(scope_spans):
                sat = f"{at}.scopeSpans[{j}]"
                if not isinstance(ss, dict):
                    yield IngestError(WRONG_FIELD_TYPE, "a scopeSpans entry must be an object", sat)
                    continue
                scope = ss.get("scope") or ss.get("instrumentationLibrary")
                try:
                    spans = _list(ss, "spans", sat)
                except IngestError as error:
                    yield error
                    continue
                for k, raw in enumerate(spans):
                    try:
                        yield span_of(raw, resource, scope if isinstance(scope, dict) else None, file,
                                      f"{sat}.spans[{k}]")
                    except IngestError as error:
                        yield error


def camel(record: dict[str, Any]) -> dict[str, Any]:
    """A message with protobuf's field names (``trace_id``, ``string_value``: protobuf's JSON parsers
    accept both, and ``MessageToDict(preserving_proto_field_name=True)`` writes them) in OTLP/JSON's
    lowerCamelCase; a name given both ways keeps the camelCase one."""
    if not any("_" in key for key in record):
        return record
    out = {}
    for key, value in record.items():
        head, *rest = key.split("_")
        name = head + "".join(part[:1].upper() + part[1:] for part in rest)
        if name == key or name not in record:
            out[name] = value
    return out


def any_value(value: Any, position: str) -> Any:
    """An OTLP AnyValue as a Python value: intValue (a decimal string) as int, arrayValue as a list,
    kvlistValue as a dict, bytesValue kept as its base64 text; an empty value is None."""
    if not isinstance(value, dict):
        raise IngestError(WRONG_FIELD_TYPE, "an attribute value must be an object such as {\"stringValue\": ...}",
                          position)
    value = camel(value)
    if "stringValue" in value:
        return value["stringValue"]
    if "boolValue" in value:
        return value["boolValue"]
    if "intValue" in value:
        try:
            return int(value["intValue"])
        except (TypeError, ValueError):
            raise IngestError(WRONG_FIELD_TYPE, f"intValue {value['intValue']!r} is not an integer", position) from None
    if "doubleValue" in value:
        number = value["doubleValue"]
        if isinstance(number, str):  # "NaN", "Infinity", "-Infinity" in protobuf's JSON
            try:
                return float(number)
            except ValueError:
                raise IngestError(WRONG_FIELD_TYPE, f"doubleValue {number!r} is not a number", position) from None
        return number
    if "arrayValue" in value:
        items = (value["arrayValue"] or {}).get("values") or []
        return [any_value(v, f"{position}.arrayValue.values[{i}]") for i, v in enumerate(items)]
    if "kvlistValue" in value:
        return attributes_of((value["kvlistValue"] or {}).get("values"), f"{position}.kvlistValue.values")
    if "bytesValue" in value:
        return value["bytesValue"]
    return None


def attributes_of(items: Any, position: str) -> dict[str, Any]:
    """An OTLP attribute list ``[{key, value}]`` as a dict (a repeated key: the last one, as the SDKs do)."""
    if items is None:
        return {}
    if not isinstance(items, list):
        raise IngestError(WRONG_FIELD_TYPE, "attributes must be a list of {key, value}", position)
    out: dict[str, Any] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("key"), str):
            raise IngestError(WRONG_FIELD_TYPE, "an attribute must be an object with a string key", f"{position}[{i}]")
        out[item["key"]] = any_value(item.get("value") or {}, f"{position}[{i}].value")
    return out


def span_of(raw: Any, resource: dict[str, Any], scope: dict[str, Any] | None, file: SourceFile,
            position: str) -> Span:
    """One OTLP/JSON span; a span without its ids, or with ids that are not ids, is rejected."""
    if not isinstance(raw, dict):
        raise IngestError(WRONG_FIELD_TYPE, "a span must be an object", position)
    raw = camel(raw)
    for key in ("traceId", "spanId"):
        if raw.get(key) in (None, ""):
            raise IngestError(MISSING_KEY, f"the span has no {key}", position)
    trace_id = hex_id(raw["traceId"], 16, "traceId", position)
    span_id = hex_id(raw["spanId"], 8, "spanId", position)
    parent_id = parent_span_id(raw.get("parentSpanId"), position)
    status = raw.get("status") or {}
    if not isinstance(status, dict):
        raise IngestError(WRONG_FIELD_TYPE, "status must be an object", f"{position}.status")
    events = []
    for i, event in enumerate(_list(raw, "events", position)):
        if not isinstance(event, dict):
            raise IngestError(WRONG_FIELD_TYPE, "an event must be an object", f"{position}.events[{i}]")
        event = camel(event)
        events.append({"name": event.get("name"),
                       "time_ns": time_ns(event.get("timeUnixNano"), "timeUnixNano", f"{position}.events[{i}]"),
                       "attributes": attributes_of(event.get("attributes"), f"{position}.events[{i}].attributes")})
    links = []
    for i, link in enumerate(_list(raw, "links", position)):
        if not isinstance(link, dict):
            raise IngestError(WRONG_FIELD_TYPE, "a link must be an object", f"{position}.links[{i}]")
        links.append({**{k: v for k, v in link.items() if k != "attributes"},
                      "attributes": attributes_of(link.get("attributes"), f"{position}.links[{i}].attributes")})
    name = raw.get("name")
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent_id,
        name=name if isinstance(name, str) or name is None else str(name),
        kind=span_kind(raw.get("kind")),
        start_ns=time_ns(raw.get("startTimeUnixNano"), "startTimeUnixNano", position),
        end_ns=time_ns(raw.get("endTimeUnixNano"), "endTimeUnixNano", position),
        status=status_of(status.get("code")),
        status_message=status.get("message") or None,
        attributes=attributes_of(raw.get("attributes"), f"{position}.attributes"),
        events=events,
        links=links,
        resource=resource,
        scope=scope,
        file=file,
        position=position,
        extra={k: v for k, v in raw.items() if k not in _SPAN_FIELDS},
    )
