"""Reader for the OpenTelemetry Python SDK's span JSON (``ReadableSpan.to_json()``), one trace per
file as ``{"spans": [...]}`` or a list of spans, as mozilla-ai/any-agent saves its traces.

Both spellings of the SDK are read: ``to_json()`` writes ids as ``0x`` hex, ``parent_id``, ISO times
and ``SpanKind.INTERNAL`` / ``OK``; any-agent writes ids as integers, a ``parent`` context, times in
ns and ``internal`` / ``ok``. A list item may also be the JSON text of one span (what ``to_json()``
returns). A file holding spans of several traces gives one graph per trace. The mapping is
pipelines.readers.otel's; the file's other top-level fields (any-agent's ``final_output``) are kept
in the graph's metadata.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from pipelines.readers.base import (
    INVALID_JSON,
    MISSING_KEY,
    NO_RECORDS,
    NOT_UTF8,
    WRONG_FIELD_TYPE,
    WRONG_TOP_LEVEL_TYPE,
    GraphRows,
    IngestError,
    SourceFile,
    file_sha256,
    first_bad_utf8,
    list_files,
    load_json,
    read_bytes,
    split_of,
)
from pipelines.readers.otel import Span, hex_id, merge_spans, parent_span_id, span_kind, status_of, time_ns, trace_rows
from pipelines.storage.warehouse import relative_name

kind = "otel_spans"
_SPAN_FIELDS = {"name", "context", "kind", "parent", "parent_id", "start_time", "end_time", "status", "attributes",
                "events", "links", "resource", "instrumentation_scope", "instrumentation_info"}


def discover(root: Path, source: str) -> list[SourceFile]:
    root = root.absolute()
    if root.is_file():
        return [SourceFile(source, root.parent.name, root, root.name)]
    return [SourceFile(source, split_of(root, path, root.name), path, relative_name(root, path))
            for path in list_files(root, "**/*.json")]


def read(file: SourceFile) -> Iterator[GraphRows | IngestError]:
    data = read_bytes(file.path)
    document = _load(data)
    sha256 = file_sha256(data)
    if isinstance(document, dict):
        if "spans" not in document:
            raise IngestError(MISSING_KEY, "expected {\"spans\": [...]} or a list of spans", "$")
        raw_spans, where = document["spans"], "$.spans"
        rest = {k: v for k, v in document.items() if k != "spans"}
    elif isinstance(document, list):
        raw_spans, where, rest = document, "$", {}
    else:
        raise IngestError(WRONG_TOP_LEVEL_TYPE, f"expected an object or a list, got {type(document).__name__}", "$")
    if not isinstance(raw_spans, list):
        raise IngestError(WRONG_FIELD_TYPE, "spans must be a list", where)
    traces: dict[str, list[Span]] = {}
    for i, raw in enumerate(raw_spans):
        try:
            span = span_of(raw, file, f"{where}[{i}]")
        except IngestError as error:
            yield error
            continue
        traces.setdefault(span.trace_id, []).append(span)
    if not traces:
        if not raw_spans:
            yield IngestError(NO_RECORDS, "the file holds no spans", where)
        return
    for trace_id, spans in traces.items():
        spans, repeats = merge_spans(spans)
        defects = []
        for _, error, rejected in repeats:
            if rejected:
                yield error
            else:
                defects.append(error)
        try:
            graph, found = trace_rows(trace_id, spans, file, sha256, None)
        except IngestError as error:
            yield error
            continue
        graph.defects = defects + [defect for _, defect in found]
        if rest:
            _keep_in_metadata(graph, rest)
        yield graph


def _load(data: bytes) -> Any:
    """The file's JSON with the standard library's parser: any-agent writes 128-bit trace ids as
    integers, which orjson would turn into (rounded) floats."""
    load_json(data) if not data.strip() else None  # an empty file: the shared error
    text = data.removeprefix(b"\xef\xbb\xbf")
    try:
        return json.loads(text.decode("utf-8"))
    except UnicodeDecodeError:
        raise IngestError(NOT_UTF8, "the file is not valid UTF-8", first_bad_utf8(text)) from None
    except json.JSONDecodeError as exc:
        raise IngestError(INVALID_JSON, exc.msg, f"line {exc.lineno} column {exc.colno}") from None


def _keep_in_metadata(graph: GraphRows, rest: dict[str, Any]) -> None:
    """The file's other top-level fields (any-agent's final_output) in the graph's metadata."""
    graphs = graph.tables["graphs"]
    metadata = orjson.loads(graphs["metadata"][0].as_py() or "{}")
    metadata["file"] = rest
    column = graphs.schema.get_field_index("metadata")
    graph.tables["graphs"] = graphs.set_column(column, graphs.schema.field(column),
                                               [[orjson.dumps(metadata, option=orjson.OPT_SORT_KEYS).decode()]])


def _dict(value: Any, what: str, position: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise IngestError(WRONG_FIELD_TYPE, f"{what} must be an object", position)
    return value


def span_of(raw: Any, file: SourceFile, position: str) -> Span:
    """One span of the SDK's JSON (or the JSON text of one); without its ids it is rejected."""
    if isinstance(raw, str):
        try:
            raw = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise IngestError(WRONG_FIELD_TYPE, f"a span given as text is not JSON: {exc.msg}", position) from None
    if not isinstance(raw, dict):
        raise IngestError(WRONG_FIELD_TYPE, "a span must be an object", position)
    context = _dict(raw.get("context"), "context", f"{position}.context")
    for key in ("trace_id", "span_id"):
        if context.get(key) in (None, ""):
            raise IngestError(MISSING_KEY, f"the span has no context.{key}", f"{position}.context")
    trace_id = hex_id(context["trace_id"], 16, "context.trace_id", position)
    span_id = hex_id(context["span_id"], 8, "context.span_id", position)
    parent = raw.get("parent")
    parent_raw = parent.get("span_id") if isinstance(parent, dict) else parent if parent is not None else raw.get(
        "parent_id")
    parent_id = parent_span_id(parent_raw, position)
    status = _dict(raw.get("status"), "status", f"{position}.status")
    attributes = _dict(raw.get("attributes"), "attributes", f"{position}.attributes")
    raw_events = raw.get("events") or []
    if not isinstance(raw_events, list):
        raise IngestError(WRONG_FIELD_TYPE, "events must be a list", f"{position}.events")
    events = []
    for i, event in enumerate(raw_events):
        at = f"{position}.events[{i}]"
        event = _dict(event, "an event", at)
        events.append({"name": event.get("name"),
                       "time_ns": time_ns(event.get("timestamp", event.get("time_unix_nano")), "timestamp", at),
                       "attributes": _dict(event.get("attributes"), "attributes", f"{at}.attributes")})
    links = raw.get("links") or []
    if not isinstance(links, list):
        raise IngestError(WRONG_FIELD_TYPE, "links must be a list", f"{position}.links")
    resource = _dict(raw.get("resource"), "resource", f"{position}.resource")
    resource_attributes = _dict(resource.get("attributes"), "resource.attributes", f"{position}.resource")
    name = raw.get("name")
    extra = {k: v for k, v in raw.items() if k not in _SPAN_FIELDS}
    if context.get("trace_state") not in (None, "", {"entries": {}}, "[]"):
        extra["trace_state"] = context["trace_state"]
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent_id,
        name=name if isinstance(name, str) or name is None else str(name),
        kind=span_kind(raw.get("kind")),
        start_ns=time_ns(raw.get("start_time"), "start_time", position),
        end_ns=time_ns(raw.get("end_time"), "end_time", position),
        status=status_of(status.get("status_code")),
        status_message=status.get("description") or None,
        attributes=attributes,
        events=events,
        links=links,
        resource=resource_attributes,
        scope=_dict(raw.get("instrumentation_scope") or raw.get("instrumentation_info"), "scope", position) or None,
        file=file,
        position=position,
        extra=extra,
    )
