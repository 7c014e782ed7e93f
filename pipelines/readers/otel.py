"""The one mapping of OpenTelemetry spans onto the execution-graph tables, shared by the readers of
OTLP/JSON files (``otlp``) and of the OTel Python SDK's span JSON (``otel_spans``).

The two readers only parse their format into :class:`Span` objects (ids as hex, times in ns,
attributes as a flat dict of Python values); everything else happens here (docs/SOURCES.md says it
for users):

* one graph per trace, ``graph_id = 'otel:' || <32 hex digits of the trace id>``;
* one operation per span, ``op_id`` = its 16 hex digits, ``step`` = its position by start time;
  the span kind (``openinference.span.kind``, else ``gen_ai.operation.name``) is the operation's
  category, which sql/seeds/operation_types.csv maps onto the shared operation types;
* the span's inputs (system instructions, input messages, ``input.value``, tool arguments) and
  outputs (output messages, ``output.value``, tool results, retrieved documents, exception events)
  are nodes; information flows from each input to each output of a span, from a span's inputs to
  its first child's, from each child's outputs to the next child's inputs, and from the last
  child's outputs to the parent's outputs (edges);
* ``session.id`` / ``gen_ai.conversation.id`` (inherited from the parent span) are sessions;
* whatever is not mapped stays in the operation's metadata (attributes, events, links, scope).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pyarrow as pa

from pipelines import schema
from pipelines.readers.base import (
    DANGLING_REFERENCE,
    DUPLICATE_KEY,
    INVALID_ID,
    MISSING_KEY,
    NOT_UTF8,
    WRONG_FIELD_TYPE,
    GraphRows,
    IngestError,
    SourceFile,
    graph_row,
    table,
    value_columns,
)

GRAPH_PREFIX = "otel:"
_HEX = re.compile(r"[0-9a-fA-F]+")
_INDEXED = re.compile(r"^(?P<prefix>llm\.(?:input|output)_messages|retrieval\.documents)\.(?P<i>\d+)\.(?P<rest>.+)$")

# Span attributes that become nodes: (attribute, node class, node category, input or output).
_TEXT_NODES: tuple[tuple[str, str, str, bool], ...] = (
    ("gen_ai.system_instructions", "system_instructions", "system_prompt", True),
    ("gen_ai.prompt", "input", "input", True),
    ("input.value", "input", "input", True),
    ("gen_ai.tool.call.arguments", "tool_parameters", "tool_parameters", True),
    ("gen_ai.tool.args", "tool_parameters", "tool_parameters", True),
    ("tool.parameters", "tool_parameters", "tool_parameters", True),
    ("output.value", "output", "output", False),
    ("gen_ai.output", "output", "output", False),
    ("gen_ai.completion", "output", "output", False),
    ("gen_ai.tool.call.result", "tool_result", "tool_result", False),
)
_MESSAGE_LISTS = (("gen_ai.input.messages", True), ("gen_ai.output.messages", False))
_KIND_KEYS = ("openinference.span.kind", "gen_ai.operation.name")
_MODEL_KEYS = ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name", "embedding.model_name")
_INPUT_TOKEN_KEYS = ("gen_ai.usage.input_tokens", "llm.token_count.prompt", "gen_ai.usage.prompt_tokens")
_OUTPUT_TOKEN_KEYS = ("gen_ai.usage.output_tokens", "llm.token_count.completion", "gen_ai.usage.completion_tokens")
_SESSION_KEYS = (("session.id", "session"), ("gen_ai.conversation.id", "conversation"))
_AGENT_KEYS = ("gen_ai.agent.name", "agent.name")
_SPAN_KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
_STATUS = {0: "unset", 1: "ok", 2: "error"}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class Span:
    """One span as both formats give it, ids as lower-case hex and times in ns since the epoch."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str | None
    kind: str | None
    start_ns: int | None
    end_ns: int | None
    status: str
    status_message: str | None
    attributes: dict[str, Any]
    events: list[dict[str, Any]]
    links: list[Any]
    resource: dict[str, Any]
    scope: dict[str, Any] | None
    file: SourceFile
    position: str
    extra: dict[str, Any] = field(default_factory=dict)  # other fields of the span, kept in metadata


# -- what both formats share: ids, times, status ------------------------------------------------------


def parent_span_id(value: Any, position: str) -> str | None:
    """A parent span id, or None for none: absent, empty, or all zeros (what some exporters write
    for a root span)."""
    if value in (None, "") or _id_number(value, 8) == 0:
        return None
    return hex_id(value, 8, "parent span id", position)


def hex_id(value: Any, nbytes: int, what: str, position: str) -> str:
    """A trace (16 bytes) or span (8 bytes) id as lower-case hex: from hex (OTLP/JSON), ``0x`` hex
    (the SDK's to_json), an integer (any-agent), or base64 (protobuf's generic JSON mapping). An id
    of all zeros is invalid."""
    number = _id_number(value, nbytes)
    if number is None or not 0 < number < 1 << (8 * nbytes):
        raise IngestError(INVALID_ID, f"{what} {value!r} is not a valid {nbytes}-byte id (hex, 0x hex, integer "
                          f"or base64)", position)
    return f"{number:0{2 * nbytes}x}"


def _id_number(value: Any, nbytes: int) -> int | None:
    """The number an id of ``nbytes`` bytes stands for, in any of its spellings; None if none."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text[:2].lower() == "0x" and _HEX.fullmatch(text[2:]):
        return int(text[2:], 16)
    if len(text) == 2 * nbytes and _HEX.fullmatch(text):
        return int(text, 16)
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_" if "-" in text or "_" in text else None,
                               validate=True)
    except (binascii.Error, ValueError):
        return None
    return int.from_bytes(raw, "big") if len(raw) == nbytes else None


def time_ns(value: Any, what: str, position: str) -> int | None:
    """Nanoseconds since the epoch from an integer, a decimal string (OTLP/JSON) or an ISO 8601
    time (the SDK's to_json); None when absent."""
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return _in_range(value, what, position)
    if isinstance(value, float) and math.isfinite(value):
        return _in_range(int(value), what, position)
    if isinstance(value, str):
        text = value.strip()
        if text.isascii() and text.isdigit():
            return _in_range(int(text), what, position)
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            if moment.tzinfo is None:  # the SDK writes UTC ("...Z"); a time without a zone is taken as UTC
                moment = moment.replace(tzinfo=UTC)
            return _in_range((moment - _EPOCH) // timedelta(microseconds=1) * 1000, what, position)
    raise IngestError(WRONG_FIELD_TYPE, f"{what} {value!r} is not a time (ns integer, decimal string or ISO 8601)",
                      position)


def _in_range(ns: int, what: str, position: str) -> int:
    """A time that fits a 64-bit nanosecond count (what Arrow and DuckDB hold)."""
    if not -(1 << 63) <= ns < 1 << 63:
        raise IngestError(WRONG_FIELD_TYPE, f"{what} {ns} is out of range for a time in ns", position)
    return ns


def span_kind(value: Any) -> str | None:
    """internal, server, client, producer, consumer (or unspecified) from the OTLP integer, the
    protobuf enum name (``SPAN_KIND_SERVER``) or the SDK's ``SpanKind.SERVER`` / ``server``."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return _SPAN_KINDS.get(value, str(value))
    text = str(value).strip().lower().removeprefix("spankind.").removeprefix("span_kind_")
    return text or None


def status_of(code: Any) -> str:
    """ok, error or unset from the OTLP integer, ``STATUS_CODE_OK`` or the SDK's ``OK`` / ``ok``."""
    if code is None:
        return "unset"
    if isinstance(code, int) and not isinstance(code, bool):
        return _STATUS.get(code, "unset")
    text = str(code).strip().lower().removeprefix("statuscode.").removeprefix("status_code_")
    return text if text in schema.SPAN_STATUSES else "unset"


# -- the mapping ---------------------------------------------------------------------------------------


@dataclass
class _Node:
    node_id: str
    name: str
    class_name: str
    category: str
    value: str | None
    is_input: bool
    time_ns: int | None
    metadata: dict[str, Any]


def _text(value: Any) -> str | None:
    """An attribute value as node text: strings as they are, anything else as JSON (integers past
    64 bits, which orjson refuses, through the standard library)."""
    if value is None or isinstance(value, str):
        return value
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _first(attributes: dict[str, Any], keys: Iterable[str]) -> Any:
    return next((attributes[k] for k in keys if attributes.get(k) not in (None, "")), None)


def _count(value: Any) -> int | None:
    """A token count from an int, a float or a decimal string; None for anything else."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    elif isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        value = int(value.strip())
    return value if isinstance(value, int) and -(1 << 63) <= value < 1 << 63 else None


def _message_nodes(span: Span, attribute: str, value: Any, is_input: bool) -> list[_Node]:
    """gen_ai.input.messages / gen_ai.output.messages: JSON text of a list of messages, one node
    each (the content as the value when a message is just role and text content, else the message
    as JSON); text that is not a JSON list is one node as written."""
    direction = "input" if is_input else "output"
    messages: Any = value
    if isinstance(value, str):
        try:
            messages = orjson.loads(value)
        except orjson.JSONDecodeError:
            messages = None
    if not isinstance(messages, list):
        return [_Node(f"message:{span.span_id}/{direction}@1", f"{direction}_messages", "message", "message",
                      _text(value), is_input, None, {"attribute": attribute})]
    nodes = []
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        simple = isinstance(message, dict) and isinstance(message.get("content"), str) and set(message) <= {
            "role", "content"}
        nodes.append(_Node(f"message:{span.span_id}/{direction}/{i}@1", f"{direction}_messages.{i}", "message",
                           "message", message["content"] if simple else _text(message), is_input, None,
                           {"attribute": attribute, "index": i, **({"role": role} if role is not None else {})}))
    return nodes


def _indexed_nodes(span: Span, attributes: dict[str, Any], used: set[str]) -> list[_Node]:
    """OpenInference's flattened lists: llm.input_messages.<i>.message.*, llm.output_messages.<i>.*,
    retrieval.documents.<i>.document.*; one node per index, its other fields in the node's metadata."""
    groups: dict[tuple[str, int], dict[str, Any]] = {}
    for key, value in attributes.items():
        match = _INDEXED.match(key)
        if match:
            groups.setdefault((match["prefix"], int(match["i"])), {})[match["rest"]] = value
            used.add(key)
    nodes = []
    for (prefix, i), fields in sorted(groups.items()):
        if prefix == "retrieval.documents":
            content_key, class_name, category, is_input, what = (
                "document.content", "document", "retrieved_document", False, "document")
        else:
            is_input = prefix == "llm.input_messages"
            content_key, class_name, category, what = (
                "message.content", "message", "message", "input" if is_input else "output")
        rest = {k: v for k, v in fields.items() if k != content_key}
        value = fields.get(content_key)
        if value is None and rest:
            value, rest = _text(rest), {}
        node_id = f"{class_name}:{span.span_id}/{what}/{i}@1" if class_name == "message" else \
            f"{class_name}:{span.span_id}/{i}@1"
        nodes.append(_Node(node_id, f"{prefix}.{i}", class_name, category, _text(value), is_input, None,
                           {"attribute": f"{prefix}.{i}", **rest}))
    return nodes


def span_nodes(span: Span) -> tuple[list[_Node], set[str]]:
    """The nodes of one span and the attributes they took (those are not repeated in its metadata)."""
    attributes = span.attributes
    used: set[str] = set()
    nodes: list[_Node] = []
    seen_ids: set[str] = set()

    def add(node: _Node) -> None:
        while node.node_id in seen_ids:  # two attributes of one class (input.value and gen_ai.prompt)
            node.node_id = node.node_id.replace("@1", "+@1")
        seen_ids.add(node.node_id)
        nodes.append(node)

    for key, is_input in _MESSAGE_LISTS:
        if attributes.get(key) is not None:
            used.add(key)
            for node in _message_nodes(span, key, attributes[key], is_input):
                add(node)
    for node in _indexed_nodes(span, attributes, used):
        add(node)
    for key, class_name, category, is_input in _TEXT_NODES:
        if attributes.get(key) is not None:
            used.add(key)
            metadata: dict[str, Any] = {"attribute": key}
            mime = attributes.get(key.replace(".value", ".mime_type")) if key.endswith(".value") else None
            if mime is not None:
                metadata["mime_type"] = mime
            add(_Node(f"{class_name}:{span.span_id}@1", key, class_name, category, _text(attributes[key]), is_input,
                      None, metadata))
    for k, event in enumerate(span.events):
        if event.get("name") == "exception":
            fields = event.get("attributes") or {}
            add(_Node(f"exception:{span.span_id}/{k}@1", f"exception.{k}", "exception", "exception",
                      _text(fields.get("exception.message")), False, event.get("time_ns"),
                      {"event": k, **{key: v for key, v in fields.items() if key != "exception.message"}}))
    for node in nodes:
        if node.time_ns is None:
            node.time_ns = span.start_ns if node.is_input else span.end_ns
    return nodes, used


def _ms(ns: int | None) -> int | None:
    return None if ns is None else ns // 1_000_000


def _us(ns: int | None) -> int | None:
    return None if ns is None else ns // 1_000


def system_of(resource: dict[str, Any], source: str) -> str:
    """The resource's service.name; the source's name where it is missing or the SDK's default
    ``unknown_service`` (``unknown_service:python`` and the like)."""
    name = resource.get("service.name")
    if not isinstance(name, str) or not name.strip() or name.startswith("unknown_service"):
        return source
    return name


def merge_spans(spans: list[Span]) -> tuple[list[Span], list[tuple[SourceFile, IngestError, bool]]]:
    """The spans of one trace with repeats dropped: an exact repeat (an exporter's retry) is kept
    once and noted; a different span under a known id is rejected, naming where the first came from."""
    kept: dict[str, Span] = {}
    problems: list[tuple[SourceFile, IngestError, bool]] = []
    for span in spans:
        first = kept.get(span.span_id)
        if first is None:
            kept[span.span_id] = span
            continue
        same = _comparable(first) == _comparable(span)
        where = f"{first.file.relpath} at {first.position}"
        reason = (f"span {span.span_id} of trace {span.trace_id} repeats the one at {where}"
                  + ("; identical, kept once" if same else "; it differs, the first is kept"))
        problems.append((span.file, IngestError(DUPLICATE_KEY, reason, span.position), not same))
    return list(kept.values()), problems


def _comparable(span: Span) -> tuple[Any, ...]:
    return (span.parent_id, span.name, span.kind, span.start_ns, span.end_ns, span.status, span.status_message,
            _text(span.attributes), _text(span.events), _text(span.links))


def trace_rows(trace_id: str, spans: list[Span], home: SourceFile, sha256: str,
               files: list[str] | None) -> tuple[GraphRows, list[tuple[SourceFile, IngestError]]]:
    """The canonical rows of one trace (its spans already free of repeats). ``home``: the file the
    graph is said to come from (the first, in path order, holding one of its spans); ``files``: all
    of them when there are several. Returns the graph and the defects found on the way, each with
    the file of the span it concerns."""
    try:
        return _trace_rows(trace_id, spans, home, sha256, files)
    except UnicodeEncodeError as exc:  # a lone surrogate from a JSON \ud800 escape (the standard library parses it)
        raise IngestError(NOT_UTF8, f"trace {trace_id} holds text that is not valid Unicode: {exc.reason}") from None


def _trace_rows(trace_id: str, spans: list[Span], home: SourceFile, sha256: str,
                files: list[str] | None) -> tuple[GraphRows, list[tuple[SourceFile, IngestError]]]:
    gid = GRAPH_PREFIX + trace_id
    spans = sorted(spans, key=lambda s: (s.start_ns is None, s.start_ns or 0, s.span_id))
    by_id = {s.span_id: s for s in spans}
    defects: list[tuple[SourceFile, IngestError]] = []
    for span in spans:
        if span.parent_id is not None and span.parent_id not in by_id:
            defects.append((span.file, IngestError(
                DANGLING_REFERENCE, f"span {span.span_id} names parent {span.parent_id}, which trace {trace_id} "
                "does not hold (not exported, or in a batch still to come); loaded as a root", span.position)))
    # the root: the first span without a parent, else the first whose parent is missing
    roots = [s for s in spans if s.parent_id is None] or [s for s in spans if s.parent_id not in by_id]
    root = roots[0] if roots else spans[0]
    system = system_of(root.resource, home.source)

    def inherited(span: Span, keys: Iterable[str]) -> tuple[str, Any] | None:
        seen: set[str] = set()
        current: Span | None = span
        while current is not None and current.span_id not in seen:
            seen.add(current.span_id)
            for key in keys:
                if current.attributes.get(key) not in (None, ""):
                    return key, current.attributes[key]
            current = by_id.get(current.parent_id) if current.parent_id else None
        return None

    # sessions: the span's own session.id / gen_ai.conversation.id, else its parent's
    session_of: dict[str, str | None] = {}
    sessions: dict[str, tuple[str, int | None]] = {}  # id -> (category, first start)
    categories = dict(_SESSION_KEYS)
    for span in spans:
        found = inherited(span, categories)
        session_of[span.span_id] = None if found is None else _text(found[1])
        if found is not None and session_of[span.span_id] not in sessions:
            sessions[session_of[span.span_id]] = (categories[found[0]], span.start_ns)

    node_rows: list[_Node] = []
    node_session: list[str | None] = []
    span_io: dict[str, tuple[list[str], list[str]]] = {}
    op_rows: list[dict[str, Any]] = []
    for step, span in enumerate(spans):
        nodes, used = span_nodes(span)
        node_rows.extend(nodes)
        node_session.extend([session_of[span.span_id]] * len(nodes))
        span_io[span.span_id] = ([n.node_id for n in nodes if n.is_input], [n.node_id for n in nodes if not n.is_input])
        attributes = span.attributes
        kind = _first(attributes, _KIND_KEYS)
        model = _first(attributes, _MODEL_KEYS)
        agent = inherited(span, _AGENT_KEYS)
        metadata = {
            "attributes": {k: v for k, v in attributes.items() if k not in used},
            **({"events": span.events} if span.events else {}),
            **({"links": span.links} if span.links else {}),
            **({"scope": span.scope} if span.scope else {}),
            **({"resource": span.resource} if span.resource != root.resource else {}),
            **span.extra,
        }
        op_rows.append({
            "op_id": span.span_id,
            "op_name": span.name,
            "category": None if kind is None else _text(kind),
            "session_id": session_of[span.span_id],
            "actor": None if agent is None else _text(agent[1]),
            "step": step,
            "created_at": _ms(span.start_ns),
            "metadata": _text(metadata),
            "parent_op_id": span.parent_id,
            "span_kind": span.kind,
            "start_time": _us(span.start_ns),
            "end_time": _us(span.end_ns),
            "status": span.status,
            "status_message": _text(span.status_message),
            "model": None if model is None else _text(model),
            "input_tokens": _count(_first(attributes, _INPUT_TOKEN_KEYS)),
            "output_tokens": _count(_first(attributes, _OUTPUT_TOKEN_KEYS)),
        })

    edges = _flows(spans, by_id, span_io)
    values = pa.array([n.value for n in node_rows], type=pa.large_string())
    n_nodes = len(node_rows)
    nodes_table = table(schema.NODES, {
        "graph_id": [gid] * n_nodes,
        "full_node_id": [n.node_id for n in node_rows],
        "name": [n.name for n in node_rows],
        "class_name": [n.class_name for n in node_rows],
        "version": [1] * n_nodes,
        "category": [n.category for n in node_rows],
        "session_id": node_session,
        "value": values,
        **value_columns(values),
        "created_at": pa.array([_ms(n.time_ns) for n in node_rows], type=pa.int64()).cast(schema.TIMESTAMP),
        "metadata": [_text(n.metadata) for n in node_rows],
    })
    edges_table = edges_of_flows(gid, edges, session_of, {op: by_id[op].start_ns for _, _, op, _ in edges})
    operations_table = operations_of_rows(gid, op_rows)
    session_ids = list(sessions)
    sessions_table = table(schema.SESSIONS, {
        "graph_id": [gid] * len(session_ids),
        "session_id": session_ids,
        "session_name": session_ids,
        "category": [sessions[s][0] for s in session_ids],
        "created_at": pa.array([_ms(sessions[s][1]) for s in session_ids], type=pa.int64()).cast(schema.TIMESTAMP),
        "ordinal": list(range(len(session_ids))),
    })
    annotations_table = table(schema.ANNOTATIONS, {"graph_id": pa.array([], pa.string())})
    tables = {"sessions": sessions_table, "nodes": nodes_table, "edges": edges_table,
              "operations": operations_table, "annotations": annotations_table}
    counts = {name: tables[name].num_rows for name in schema.COUNT_COLUMNS}
    starts = [s.start_ns for s in spans if s.start_ns is not None]
    user = inherited(root, ("user.id",)) or next(((k, v) for s in spans for k, v in s.attributes.items()
                                                   if k == "user.id"), None)
    project = root.resource.get("openinference.project.name")
    services = sorted({system_of(s.resource, home.source) for s in spans} - {system})
    graph_metadata = {"trace_id": trace_id, "root_span_id": root.span_id, "resource": root.resource,
                      **({"other_services": services} if services else {})}
    graph = graph_row(
        graph_id=gid, file=home, sha256=sha256, system=system, dataset=schema.UNKNOWN,
        user_id=None if user is None else _text(user[1]),
        project_id=_text(project) if project not in (None, "") else system,
        created_at=pa.array([_ms(min(starts)) if starts else None], type=pa.int64()).cast(schema.TIMESTAMP),
        counts=counts, metadata=_text(graph_metadata))
    if files is not None:
        graph = graph.set_column(graph.schema.get_field_index("files"), schema.GRAPHS.field("files"),
                                 pa.array([files], type=pa.list_(pa.string())))
    tables["graphs"] = graph
    return GraphRows({name: tables[name] for name in schema.GRAPH_TABLES}), defects


def _flows(spans: list[Span], by_id: dict[str, Span],
           io: dict[str, tuple[list[str], list[str]]]) -> list[tuple[str, str, str, str]]:
    """(source node, target node, op, kind) for every information flow of a trace: a span's inputs
    to its outputs (``span``); a parent's inputs to its first child's that has inputs
    (``parent_input``); a child's outputs to the next child's inputs (``sequence``, children by start
    time; to its outputs when it records no inputs); the last child's outputs to the parent's
    outputs (``child_output``)."""
    flows: list[tuple[str, str, str, str]] = []
    children: dict[str, list[Span]] = {}
    for span in spans:  # already in start order
        if span.parent_id in by_id:
            children.setdefault(span.parent_id, []).append(span)
    for span in spans:
        inputs, outputs = io[span.span_id]
        flows.extend((src, dst, span.span_id, "span") for src in inputs for dst in outputs)
        kids = children.get(span.span_id, [])
        first = next((k for k in kids if io[k.span_id][0]), None)
        if first is not None:
            flows.extend((src, dst, first.span_id, "parent_input") for src in inputs for dst in io[first.span_id][0])
        for before, after in zip(kids, kids[1:], strict=False):
            targets = io[after.span_id][0] or io[after.span_id][1]  # no recorded inputs: it read them anyway
            flows.extend((src, dst, after.span_id, "sequence") for src in io[before.span_id][1] for dst in targets)
        last = next((k for k in reversed(kids) if io[k.span_id][1]), None)
        if last is not None:
            flows.extend((src, dst, span.span_id, "child_output") for src in io[last.span_id][1] for dst in outputs)
    return flows


def edges_of_flows(gid: str, flows: list[tuple[str, str, str, str]], session_of: dict[str, str | None],
                   start_ns_of: dict[str, int | None]) -> pa.Table:
    """The ``edges`` rows of a trace's information flows (:func:`_flows`): one per flow, named by its
    op, kind and place, in the session of its op and at its op's start."""
    return table(schema.EDGES, {
        "graph_id": [gid] * len(flows),
        "edge_id": [f"{op}:{kind}:{k}" for k, (_, _, op, kind) in enumerate(flows)],
        "op_id": [op for _, _, op, _ in flows],
        "source_full_node_id": [src for src, _, _, _ in flows],
        "target_full_node_id": [dst for _, dst, _, _ in flows],
        "category": [kind for _, _, _, kind in flows],
        "session_id": [session_of[op] for _, _, op, _ in flows],
        "created_at": pa.array([_ms(start_ns_of[op]) for _, _, op, _ in flows], type=pa.int64()).cast(
            schema.TIMESTAMP),
    })


def operations_of_rows(gid: str, op_rows: list[dict[str, Any]]) -> pa.Table:
    """The ``operations`` rows of a trace's spans-like records (one dict a record, keyed by column):
    ``created_at`` (milliseconds) and ``start_time``/``end_time`` (microseconds) become timestamps,
    the other columns are taken as they are, and a column the records lack is null."""
    timestamps = {"created_at": schema.TIMESTAMP, "start_time": schema.TIMESTAMP_US, "end_time": schema.TIMESTAMP_US}
    columns: dict[str, Any] = {"graph_id": [gid] * len(op_rows)}
    for name in op_rows[0] if op_rows else ():
        values = [row[name] for row in op_rows]
        columns[name] = pa.array(values, type=pa.int64()).cast(timestamps[name]) if name in timestamps else values
    return table(schema.OPERATIONS, columns)


def information_flows(spans: list[Span], io: dict[str, tuple[list[str], list[str]]]) -> list[tuple[str, str, str, str]]:
    """The edges of :func:`_flows` for a reader that makes its own nodes of spans-like records
    (langfuse's observations): ``spans`` in start order, ``io`` each span's input and output node
    ids. The same four flows as every OpenTelemetry trace."""
    return _flows(spans, {s.span_id: s for s in spans}, io)


def combined_sha256(digests: list[tuple[str, str]]) -> str:
    """file_sha256 of a trace read from several files: the sha256 of their paths and sha256s, one
    ``<path>\\0<sha256>\\n`` each in path order, so it changes when any of them does."""
    text = "".join(f"{path}\0{digest}\n" for path, digest in sorted(digests))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def require(record: dict[str, Any], key: str, position: str) -> Any:
    if record.get(key) in (None, ""):
        raise IngestError(MISSING_KEY, f"missing required key {key!r}", position)
    return record[key]
