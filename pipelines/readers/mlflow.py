"""Reader for MLflow traces with their assessments, as MLflow writes a trace's JSON (``mlflow traces get``,
``Trace.to_json()``): ``{"info": {..., "assessments": [...]}, "data": {"spans": [...]}}``, one trace per
``.json`` file, a JSON list of them, or one a line in ``.jsonl`` files (gzip too); a page of ``mlflow
traces search --output json`` (``{"traces": [...]}``) is read too, and a record of
``mlflow.search_traces()``'s frame saved as JSON lines: its ``trace`` column (the trace's JSON), else
its ``spans`` and ``assessments`` columns.

Spans map through the one OpenTelemetry mapping (pipelines.readers.otel): graph ``otel:<32 hex of the
spans' trace id>``, one operation per span, ``op_id`` = its 16 hex digits, whichever spelling the
record uses (base64 in ``data.spans``, hex in the assessments, ``0x`` hex in MLflow 2's spans). Span
attribute values are JSON-encoded text and are decoded; ``mlflow.spanType`` is the span kind
(``openinference.span.kind``) and ``mlflow.spanInputs`` / ``mlflow.spanOutputs`` become the span's
``input.value`` / ``output.value`` nodes. Each assessment (feedback, expectation or issue), on a span or on
the whole trace, becomes an annotation of the trace: its name the taxonomy, its value the error type,
its rationale the reason, its span the faulty operation, its source type the annotator kind; every
other field in ``extra``. The trace's ``info`` (MLflow's trace id, state, metadata, tags) is kept in
the graph's metadata under ``mlflow``.
"""

from __future__ import annotations

import gzip
import json
import math
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from pipelines import schema
from pipelines.readers.base import (
    DANGLING_REFERENCE,
    DUPLICATE_KEY,
    EMPTY_FILE,
    INVALID_JSON,
    MISSING_KEY,
    NO_RECORDS,
    NOT_UTF8,
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
    split_of,
    table,
)
from pipelines.readers.otel import Span, hex_id, merge_spans, parent_span_id, span_kind, status_of, time_ns, trace_rows
from pipelines.storage.warehouse import relative_name

kind = "mlflow"
PATTERNS = ("**/*.json", "**/*.jsonl", "**/*.json.gz", "**/*.jsonl.gz")
PROVENANCE = "mlflow"
# MLflow's assessment source types -> annotations.annotator_kind (AI_JUDGE: MLflow 2's name for LLM_JUDGE)
ANNOTATOR_KINDS = {"HUMAN": "human", "LLM_JUDGE": "llm", "AI_JUDGE": "llm", "CODE": "code"}
# Span attributes the OpenInference mapping reads, from MLflow's own
_SPAN_TYPE, _INPUTS, _OUTPUTS = "mlflow.spanType", "mlflow.spanInputs", "mlflow.spanOutputs"
_TOKEN_USAGE = "mlflow.chat.tokenUsage"
_MODEL = "mlflow.llm.model"
# Trace metadata naming the trace's session and user (MLflow's TraceMetadataKey)
_SESSION, _USER = "mlflow.trace.session", "mlflow.trace.user"
_SPAN_FIELDS = {"trace_id", "span_id", "parent_span_id", "parent_id", "context", "name", "kind",
                "start_time_unix_nano", "end_time_unix_nano", "start_time", "end_time", "status", "status_code",
                "status_message", "attributes", "events", "links", "resource"}
_ASSESSMENT_MAPPED = {"assessment_name", "name", "rationale", "feedback", "expectation", "issue", "source"}


def discover(root: Path, source: str) -> list[SourceFile]:
    root = root.absolute()
    if root.is_file():
        return [SourceFile(source, root.parent.name, root, root.name)]
    paths = sorted({p for pattern in PATTERNS for p in list_files(root, pattern)}, key=lambda p: relative_name(root, p))
    return [SourceFile(source, split_of(root, path, root.name), path, relative_name(root, path)) for path in paths]


def read(file: SourceFile) -> Iterator[GraphRows | IngestError]:
    raw = read_bytes(file.path)
    sha256 = file_sha256(raw)
    any_record = False
    for item in _records(_decompress(raw), file.relpath.endswith((".jsonl", ".jsonl.gz"))):
        if isinstance(item, IngestError):
            yield item
            continue
        any_record = True
        position, record = item
        try:
            yield from _trace(record, file, sha256, position)
        except IngestError as error:
            yield error
    if not any_record:
        yield IngestError(NO_RECORDS, "the file holds no MLflow trace")


def _decompress(data: bytes) -> bytes:
    if data[:2] != b"\x1f\x8b":
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise IngestError(UNREADABLE, f"the gzip stream is broken: {exc}") from None


def _records(data: bytes, lines_by_name: bool) -> Iterator[tuple[str, Any] | IngestError]:
    """(position, record) for every trace record of the file: the whole file as one JSON document (a
    trace, a list of them, a search page) when it is one, else one per non-blank line when the file
    is JSON lines (by its name, or its first line is a whole record); else the document's error."""
    data = data.removeprefix(b"\xef\xbb\xbf")
    if not data.strip():
        raise IngestError(EMPTY_FILE, "the file is empty")
    try:
        whole = _parse(data)
    except IngestError as error:
        first = next(line for line in data.split(b"\n") if line.strip())
        if not lines_by_name and not _parses(first):
            raise error from None
    else:
        if isinstance(whole, list):
            for i, record in enumerate(whole):
                yield from _traces_of(f"$[{i}]", record)
        else:
            yield from _traces_of("$", whole)
        return
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            record = _parse(line)
        except IngestError as error:
            inside = (error.position or "").removeprefix("line 1 ")  # the line's own line 1 is the file's line
            where = f"line {number}" + (f" {inside}" if inside else "")
            yield IngestError(error.kind, error.reason, where)
        else:
            yield from _traces_of(f"line {number}: $", record)


def _parse(data: bytes) -> Any:
    """One JSON document: orjson, else the standard library, which also takes what Python's json.dumps
    writes and orjson refuses (NaN, Infinity, integers past 64 bits)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise IngestError(NOT_UTF8, "not valid UTF-8", first_bad_utf8(data)) from None
    except json.JSONDecodeError as exc:
        raise IngestError(INVALID_JSON, exc.msg, f"line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise IngestError(INVALID_JSON, "nested too deeply") from None


def _parses(line: bytes) -> bool:
    try:
        _parse(line)
    except IngestError:
        return False
    return True


def _traces_of(position: str, record: Any) -> Iterator[tuple[str, Any] | IngestError]:
    """The traces of one record: itself, or those of a page of ``mlflow traces search --output json``
    (``{"traces": [...], "next_page_token": ...}``)."""
    if isinstance(record, dict) and "info" not in record and "traces" in record:
        traces = record["traces"]
        if not isinstance(traces, list):
            yield IngestError(WRONG_FIELD_TYPE, "traces must be a list", f"{position}.traces")
            return
        for i, trace in enumerate(traces):
            yield f"{position}.traces[{i}]", trace
    else:
        yield position, record


# -- one trace ---------------------------------------------------------------------------------------


def _dict(value: Any, what: str, position: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise IngestError(WRONG_FIELD_TYPE, f"{what} must be an object, got {type(value).__name__}", position)
    return value


def _list(value: Any, what: str, position: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise IngestError(WRONG_FIELD_TYPE, f"{what} must be a list, got {type(value).__name__}", position)
    return value


def _json_text(value: Any, what: str, position: str) -> Any:
    """A value a frame saved as the JSON text of an object or list (the ``trace`` column, a span)."""
    if not isinstance(value, str):
        return value
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise IngestError(WRONG_FIELD_TYPE, f"{what} given as text is not JSON: {exc.msg}", position) from None


def _parts(record: Any, position: str) -> tuple[dict[str, Any], list[Any], str, list[Any], str, dict[str, Any]]:
    """A record's trace info, its spans and where they are, its assessments and where they are, and
    the other fields of its ``data``."""
    if not isinstance(record, dict):
        raise IngestError(WRONG_TOP_LEVEL_TYPE, f"expected an MLflow trace object, got {type(record).__name__}",
                          position)
    if "info" not in record and "trace" in record:  # a row of search_traces()'s frame: the trace's JSON
        position = f"{position}.trace"
        record = _json_text(record["trace"], "trace", position)
        if not isinstance(record, dict) or "info" not in record:
            raise IngestError(MISSING_KEY, "the trace column holds no {\"info\", \"data\"} trace", position)
    if "info" in record:
        info = _dict(record["info"], "info", f"{position}.info")
        data = _dict(record.get("data"), "data", f"{position}.data")
        spans = _list(data.get("spans"), "data.spans", f"{position}.data.spans")
        assessments = _list(info.get("assessments"), "info.assessments", f"{position}.info.assessments")
        rest = {k: v for k, v in data.items() if k != "spans"}
        return ({k: v for k, v in info.items() if k != "assessments"}, spans, f"{position}.data.spans", assessments,
                f"{position}.info.assessments", rest)
    if "spans" in record:  # a frame row without the trace column: its info as columns
        spans = _list(_json_text(record["spans"], "spans", f"{position}.spans"), "spans", f"{position}.spans")
        assessments = _list(_json_text(record.get("assessments"), "assessments", f"{position}.assessments"),
                            "assessments", f"{position}.assessments")
        info = {k: v for k, v in record.items() if k not in ("spans", "assessments")}
        return info, spans, f"{position}.spans", assessments, f"{position}.assessments", {}
    raise IngestError(MISSING_KEY, "expected an MLflow trace: {\"info\": {...}, \"data\": {\"spans\": [...]}}",
                      position)


def _trace(record: Any, file: SourceFile, sha256: str, position: str) -> Iterator[GraphRows | IngestError]:
    info, raw_spans, spans_at, assessments, assessments_at, data_rest = _parts(record, position)
    name = info.get("trace_id") or info.get("request_id")
    label = f"trace {name}" if name else "the trace"
    spans: list[Span] = []
    for i, raw in enumerate(raw_spans):
        try:
            spans.append(_span(raw, file, f"{spans_at}[{i}]"))
        except IngestError as error:
            yield error
    if not spans:
        n = len(assessments)
        raise IngestError(NO_RECORDS, f"{label} holds no span that could be read" +
                          (f"; its {n} assessment{'s' * (n != 1)} not loaded" if n else ""), spans_at)
    trace_id = spans[0].trace_id
    same = []
    for span in spans:
        if span.trace_id != trace_id:
            yield IngestError(WRONG_FIELD_TYPE, f"span {span.span_id} of {label} names trace id {span.trace_id}, "
                              f"its other spans {trace_id}", f"{span.position}.trace_id")
        else:
            same.append(span)
    spans, repeats = merge_spans(same)
    defects = []
    for _, error, rejected in repeats:
        if rejected:
            yield error
        else:
            defects.append(error)
    _trace_attributes(spans, info)
    graph, found = trace_rows(trace_id, spans, file, sha256, None)
    graph.defects = defects + [defect for _, defect in found]
    graphs = graph.tables["graphs"]
    system, dataset = graphs["system"][0].as_py(), graphs["dataset"][0].as_py()
    ops = {span.span_id for span in spans}
    rows: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for j, raw in enumerate(assessments):
        at = f"{assessments_at}[{j}]"
        try:
            row = _annotation(raw, j, at, graph.graph_id, ops, label)
        except IngestError as error:
            yield error
            continue
        first = seen.get(row["annotation_id"])
        if first is not None:
            yield IngestError(DUPLICATE_KEY, f"assessment {row['annotation_id'].partition('#')[2]} of {label} repeats "
                              f"the one at {first}; the first is kept", at)
            continue
        seen[row["annotation_id"]] = at
        rows.append({**row, "system": system, "dataset": dataset})
    _put_annotations(graph, rows)
    _keep_in_metadata(graph, info, data_rest)
    yield graph


def _decoded(value: Any) -> Any:
    """An MLflow span attribute: the JSON text of its value (text that is not JSON is kept as written)."""
    if not isinstance(value, str):
        return value
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return value


def _attributes(raw: dict[str, Any]) -> dict[str, Any]:
    """The span's attributes decoded, with MLflow's span type, inputs, outputs, token usage and model
    under the names the OpenTelemetry mapping reads (OpenInference, GenAI); the inputs and outputs
    move (they become nodes), the rest stays as well."""
    attributes = {key: _decoded(value) for key, value in raw.items() if key not in (_INPUTS, _OUTPUTS)}
    kind = attributes.get(_SPAN_TYPE)
    if kind not in (None, "") and "openinference.span.kind" not in attributes:
        attributes["openinference.span.kind"] = kind
    for key, target in ((_INPUTS, "input"), (_OUTPUTS, "output")):
        if raw.get(key) is None or f"{target}.value" in attributes:
            continue
        value = _decoded(raw[key])
        if isinstance(value, str):  # a plain string: itself; anything else: its JSON text as MLflow wrote it
            attributes[f"{target}.value"] = value
            attributes.setdefault(f"{target}.mime_type", "text/plain")
        else:
            attributes[f"{target}.value"] = raw[key] if isinstance(raw[key], str) else _json(raw[key])
            attributes.setdefault(f"{target}.mime_type", "application/json")
    usage = attributes.get(_TOKEN_USAGE)
    if isinstance(usage, dict):
        for key, target in (("input_tokens", "gen_ai.usage.input_tokens"),
                            ("output_tokens", "gen_ai.usage.output_tokens")):
            if usage.get(key) is not None:
                attributes.setdefault(target, usage[key])
    model = attributes.get(_MODEL)
    if isinstance(model, str) and model:
        attributes.setdefault("gen_ai.request.model", model)
    return attributes


def _trace_attributes(spans: list[Span], info: dict[str, Any]) -> None:
    """The trace's session and user (its metadata) on its root spans, where the mapping looks for them
    (``session.id``, ``user.id``; children inherit them)."""
    metadata = info.get("trace_metadata") or info.get("request_metadata")
    if not isinstance(metadata, dict):
        return
    for key, target in ((_SESSION, "session.id"), (_USER, "user.id")):
        value = metadata.get(key)
        if value in (None, ""):
            continue
        for span in spans:
            if span.parent_id is None:
                span.attributes.setdefault(target, value)


def _span(raw: Any, file: SourceFile, position: str) -> Span:
    """One span as MLflow 3 writes it (``trace_id``, ``span_id``, ``parent_span_id`` in base64, times
    in ``*_unix_nano``, ``status.code``) or MLflow 2 (``context`` with ``0x`` hex ids, ``parent_id``,
    ``start_time`` / ``end_time`` in ns, ``status_code``)."""
    raw = _json_text(raw, "a span", position)
    if not isinstance(raw, dict):
        raise IngestError(WRONG_FIELD_TYPE, "a span must be an object", position)
    context = _dict(raw.get("context"), "context", f"{position}.context")
    ids = {}
    for key in ("trace_id", "span_id"):
        value = raw.get(key) if raw.get(key) not in (None, "") else context.get(key)
        if value in (None, ""):
            raise IngestError(MISSING_KEY, f"the span has no {key}", f"{position}.{key}")
        ids[key] = hex_id(value, 16 if key == "trace_id" else 8, key, f"{position}.{key}")
    parent_key = "parent_span_id" if "parent_span_id" in raw else "parent_id"
    parent_id = parent_span_id(raw.get(parent_key), f"{position}.{parent_key}")
    status = raw.get("status")
    if isinstance(status, dict):
        code = status.get("code", status.get("status_code"))
        message = status.get("message", status.get("description"))
    else:
        code = status if status is not None else raw.get("status_code")
        message = raw.get("status_message")
    attributes = _attributes(_dict(raw.get("attributes"), "attributes", f"{position}.attributes"))
    events = []
    for i, event in enumerate(_list(raw.get("events"), "events", f"{position}.events")):
        at = f"{position}.events[{i}]"
        event = _dict(event, "an event", at)
        events.append({"name": event.get("name"),
                       "time_ns": time_ns(event.get("time_unix_nano", event.get("timestamp")), "time_unix_nano", at),
                       "attributes": _dict(event.get("attributes"), "attributes", f"{at}.attributes")})
    resource = _dict(raw.get("resource"), "resource", f"{position}.resource")
    if isinstance(resource.get("attributes"), dict):
        resource = resource["attributes"]
    name = raw.get("name")
    start_key = "start_time_unix_nano" if "start_time_unix_nano" in raw else "start_time"
    end_key = "end_time_unix_nano" if "end_time_unix_nano" in raw else "end_time"
    return Span(
        trace_id=ids["trace_id"],
        span_id=ids["span_id"],
        parent_id=parent_id,
        name=name if isinstance(name, str) or name is None else str(name),
        kind=span_kind(raw.get("kind")),
        start_ns=time_ns(raw.get(start_key), start_key, position),
        end_ns=time_ns(raw.get(end_key), end_key, position),
        status=status_of(code),
        status_message=message or None,
        attributes=attributes,
        events=events,
        links=_list(raw.get("links"), "links", f"{position}.links"),
        resource=resource,
        scope=None,
        file=file,
        position=position,
        extra={k: v for k, v in raw.items() if k not in _SPAN_FIELDS},
    )


# -- assessments ---------------------------------------------------------------------------------------


def _value_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return {str: "string", dict: "object", list: "array"}.get(type(value), type(value).__name__)


def _as_text(value: Any) -> str | None:
    """A value as text: a string as it is, anything else as its compact JSON, keys in their order
    (``true``, ``3``, ``{"a":1}``)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, float) and not math.isfinite(value):  # orjson would write null
        return json.dumps(value)
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _json(value: Any) -> str:
    """JSON text, keys sorted (integers past 64 bits, which orjson refuses, through the standard library)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _annotation(raw: Any, j: int, position: str, gid: str, ops: set[str], label: str) -> dict[str, Any]:
    """The annotation row (but its system and dataset) of one assessment."""
    if not isinstance(raw, dict):
        raise IngestError(WRONG_FIELD_TYPE, f"an assessment must be an object, got {type(raw).__name__}", position)
    name = raw.get("assessment_name", raw.get("name"))
    if name in (None, ""):
        raise IngestError(MISSING_KEY, "the assessment has no assessment_name", f"{position}.assessment_name")
    if not isinstance(name, str):
        raise IngestError(WRONG_FIELD_TYPE, "assessment_name must be a string", f"{position}.assessment_name")
    extra: dict[str, Any] = {k: v for k, v in raw.items() if k not in _ASSESSMENT_MAPPED}
    for key, value_key in (("feedback", "value"), ("expectation", "value"), ("issue", "issue_name")):
        if raw.get(key) is not None:
            body = _dict(raw[key], key, f"{position}.{key}")
            value = _expectation_value(body, f"{position}.{key}") if key == "expectation" else body.get(value_key)
            extra.update({f"{key}.{k}": v for k, v in body.items() if k not in (value_key, "serialized_value")})
            extra["assessment_type"] = key
            break
    else:
        if "value" not in raw:
            raise IngestError(MISSING_KEY, "the assessment has no feedback, expectation or issue", position)
        value = raw["value"]
        extra["assessment_type"] = raw.get("assessment_type")
    extra["value"] = value
    extra["value_type"] = _value_type(value)
    source = _dict(raw.get("source"), "source", f"{position}.source")
    source_type = source.get("source_type")
    extra.update({f"source_{k}" if not k.startswith("source_") else k: v for k, v in source.items()})
    span = raw.get("span_id")
    op_id = None
    if span not in (None, ""):
        op_id = hex_id(span, 8, "span_id", f"{position}.span_id")
        if op_id not in ops:
            raise IngestError(DANGLING_REFERENCE, f"the assessment is on span {op_id}, which {label} does not hold "
                              f"(no operation {op_id} in graph {gid})", f"{position}.span_id")
    assessment_id = raw.get("assessment_id")
    rationale = raw.get("rationale")
    return {
        "graph_id": gid,
        "annotation_id": f"{gid}#{assessment_id if assessment_id not in (None, '') else f'assessment{j}'}",
        "error_type": _as_text(value),
        "taxonomy": name,
        "faulty_op_id": op_id,
        "reason": _as_text(rationale),
        "provenance": PROVENANCE,
        "annotator_kind": ANNOTATOR_KINDS.get(str(source_type).upper()) if source_type is not None else None,
        "extra": _json(extra),
    }


def _expectation_value(body: dict[str, Any], position: str) -> Any:
    """An expectation's value: ``value``, or ``serialized_value`` (JSON text, as MLflow stores values
    that are not plain)."""
    if "value" in body:
        return body["value"]
    serialized = body.get("serialized_value")
    if isinstance(serialized, dict) and isinstance(serialized.get("value"), str):
        try:
            return orjson.loads(serialized["value"])
        except orjson.JSONDecodeError:
            return serialized["value"]
    raise IngestError(MISSING_KEY, "the expectation has no value", f"{position}.value")


def _put_annotations(graph: GraphRows, rows: list[dict[str, Any]]) -> None:
    """The trace's annotations, and their count in its graphs row."""
    columns = {name: [row.get(name) for row in rows] for name in rows[0]} if rows else {
        "graph_id": []}
    graph.tables["annotations"] = table(schema.ANNOTATIONS, columns)
    graphs = graph.tables["graphs"]
    column = graphs.schema.get_field_index(schema.COUNT_COLUMNS["annotations"])
    graph.tables["graphs"] = graphs.set_column(column, graphs.schema.field(column), [[len(rows)]])


def _keep_in_metadata(graph: GraphRows, info: dict[str, Any], data_rest: dict[str, Any]) -> None:
    """The trace's info (its assessments are the annotations) and data's other fields (MLflow 2's
    request and response) in the graph's metadata, under ``mlflow``."""
    graphs = graph.tables["graphs"]
    metadata = orjson.loads(graphs["metadata"][0].as_py() or "{}")
    metadata["mlflow"] = {**info, **({"data": data_rest} if data_rest else {})}
    column = graphs.schema.get_field_index("metadata")
    graph.tables["graphs"] = graphs.set_column(column, graphs.schema.field(column), [[_json(metadata)]])
