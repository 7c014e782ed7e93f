"""Reader for Arize Phoenix's spans and span annotations: the dataframes a user saves from Phoenix's
Python client (``client.spans.get_spans_dataframe`` and ``get_span_annotations_dataframe``, each as
Parquet or JSON lines), and the records of Phoenix's REST API (``/v1/projects/{project}/spans`` and
``.../span_annotations``, which :func:`snapshot` saves from a running Phoenix as JSON lines).

A file is recognised by its columns, whatever its name (``*.parquet``, ``*.jsonl``, ``*.ndjson``,
``*.json``: JSON lines, or a JSON list of records):

* spans: ``context.span_id`` and ``context.trace_id`` (the dataframe), or ``context`` holding
  ``span_id`` and ``trace_id`` (the REST API);
* span annotations: ``span_id`` and ``annotation_name`` (the dataframe), or ``span_id``, ``name``
  and ``result`` (the REST API);
* anything else is a rejected ``missing_key`` naming the columns it lacks.

The files of one folder (the first folder level under the source; the root's own files are the
root folder's) are one split and one partition, read as a whole (``whole_partition``): an
annotation is matched to its span among the spans of its folder. Spans go through the one OTel
mapping (pipelines.readers.otel): graph ``otel:<trace id>``, ``op_id`` = the span id, the category
from ``openinference.span.kind`` (Phoenix's ``span_kind``). Phoenix keeps attributes nested (it
unflattens OpenInference's dotted keys); they are flattened back to the dotted keys spans carry.

Each span annotation becomes an annotation of its span's graph: ``faulty_op_id`` = the span id,
``error_type`` = its label, ``taxonomy`` = its name, ``reason`` = its explanation, ``annotator_kind``
HUMAN/LLM/CODE -> human/llm/code, ``provenance`` = ``phoenix``; its id, score, Phoenix's annotator
kind and its other fields in ``extra``. An annotation whose span no spans file of its folder holds
is a rejected ``dangling_reference`` (the annotations frame does not say the trace, so it has no
graph to be kept in).
"""

from __future__ import annotations

import functools
import json
import math
import os
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipelines import schema
from pipelines.readers.base import (
    DANGLING_REFERENCE,
    DUPLICATE_KEY,
    EMPTY_FILE,
    INVALID_JSON,
    INVALID_PARQUET,
    MISSING_KEY,
    NO_RECORDS,
    NOT_UTF8,
    WRONG_FIELD_TYPE,
    GraphRows,
    IngestError,
    Labels,
    SourceFile,
    file_sha256,
    first_bad_utf8,
    list_files,
    read_bytes,
    size_and_mtime,
    source_root,
    split_of,
)
from pipelines.readers.otel import Span, hex_id, merge_spans, parent_span_id, status_of, time_ns, trace_rows
from pipelines.storage.warehouse import relative_name

kind = "phoenix"
whole_partition = True  # a graph's annotations come from another file of the folder

PROVENANCE = "phoenix"
PATTERNS = ("**/*.parquet", "**/*.jsonl", "**/*.ndjson", "**/*.json")
ANNOTATOR_KINDS = {"HUMAN": "human", "LLM": "llm", "CODE": "code"}
API_KEY_VARIABLE = "PHOENIX_API_KEY"  # the REST API's key, read from the environment only
_SPAN_COLUMNS = {"name", "span_kind", "parent_id", "start_time", "end_time", "status_code", "status_message",
                 "events", "context.span_id", "context.trace_id", "context", "attributes"}
_ANNOTATION_COLUMNS = {"span_id", "id", "annotation_name", "name", "annotator_kind", "result", "result.label",
                       "result.score", "result.explanation"}
# pandas writes integer times in JSON in ms by default (date_unit); a time is read in the first unit
# in which it falls before 2262 (what a 64-bit ns count holds), as pandas.read_json infers it
_UNITS_NS = (1_000_000_000, 1_000_000, 1_000, 1)


# -- discovery and the folder's index ----------------------------------------------------------------


def discover(root: Path, source: str) -> list[SourceFile]:
    """The folder's files; a file on its own lists nothing (annotations are read with the spans
    beside them, so a source is a folder)."""
    root = root.absolute()
    if root.is_file():
        return []
    paths = {path for pattern in PATTERNS for path in list_files(root, pattern)}
    return sorted((SourceFile(source, split_of(root, path, root.name), path, relative_name(root, path))
                   for path in paths), key=lambda f: f.relpath)


def read(file: SourceFile) -> Iterator[GraphRows | IngestError | Labels]:
    root = source_root(file)
    # the files the ingest reads of this file's folder: a broken link or hidden name is rejected on its own
    folder = tuple((f.relpath, *size_and_mtime(f.path)) for f in discover(root, file.source)
                   if f.split == file.split and f.problem is None)
    items = _index(str(root), file.source, file.split, folder).items.get(file.relpath)
    if items is None:  # listed after the index was built: read with its folder as it is now
        items = _build([f for f in discover(root, file.source) if f.split == file.split and f.problem is None]
                       + [file]).items.get(file.relpath, [])
    yield from items


@dataclass
class _Index:
    """What each file of one folder yields (by relative path)."""

    items: dict[str, list[GraphRows | IngestError | Labels]] = field(default_factory=dict)

    def add(self, relpath: str, item: GraphRows | IngestError | Labels) -> None:
        self.items.setdefault(relpath, []).append(item)


@functools.lru_cache(maxsize=1)  # the folder being ingested; a changed file (size, mtime) rebuilds it
def _index(root: str, source: str, split: str, folder: tuple[tuple[str, int, int], ...]) -> _Index:
    base = Path(root)
    return _build([f for f in discover(base, source) if f.split == split and f.problem is None])


@dataclass
class _Annotation:
    span_id: str
    row: dict[str, Any]  # the mapped fields: label, name, explanation, annotator kind, extra
    file: SourceFile
    position: str


def _build(files: list[SourceFile]) -> _Index:
    index = _Index()
    spans: dict[str, list[Span]] = {}  # trace id -> spans, in file order
    homes: dict[str, tuple[SourceFile, str]] = {}  # trace id -> the first file holding it, its sha256
    annotations: list[_Annotation] = []
    for file in dict.fromkeys(files):
        index.items.setdefault(file.relpath, [])
        try:
            records, sha256 = _records(file)
            what = _shape(records, file)
        except IngestError as error:
            index.add(file.relpath, error)
            continue
        for position, record in records:
            try:
                if what == "spans":
                    span = _span(record, file, position)
                    spans.setdefault(span.trace_id, []).append(span)
                    homes.setdefault(span.trace_id, (file, sha256))
                else:
                    annotations.append(_annotation(record, file, position))
            except IngestError as error:
                index.add(file.relpath, error)
    trace_of: dict[str, str] = {}
    for trace_id, trace_spans in spans.items():
        for span in trace_spans:
            trace_of.setdefault(span.span_id, trace_id)
    by_trace: dict[str, list[_Annotation]] = {}
    labelled: dict[str, int] = {}  # annotations file -> its annotations loaded
    for note in annotations:
        trace_id = trace_of.get(note.span_id)
        if trace_id is None:
            index.add(note.file.relpath, IngestError(
                DANGLING_REFERENCE, f"the annotation is of span {note.span_id}, which no spans file of this "
                "folder holds (save the spans dataframe beside the annotations)", _at(note.position, "span_id")))
            continue
        by_trace.setdefault(trace_id, []).append(note)
    for trace_id, trace_spans in spans.items():
        home, sha256 = homes[trace_id]
        kept, repeats = merge_spans(trace_spans)
        defects = []
        for span_file, error, rejected in repeats:
            if rejected:
                index.add(span_file.relpath, error)
            else:
                defects.append(error)
        try:
            graph, found = trace_rows(trace_id, kept, home, sha256, None)
        except IngestError as error:
            index.add(home.relpath, error)
            for note in by_trace.get(trace_id, []):  # its annotations have no graph to go to: said, not dropped
                index.add(note.file.relpath, IngestError(
                    DANGLING_REFERENCE, f"the annotation is of span {note.span_id} of trace {trace_id}, which "
                    f"{home.relpath} could not give ({error.reason})", _at(note.position, "span_id")))
            continue
        graph.defects = defects + [defect for _, defect in found]
        graph, loaded = _with_annotations(graph, by_trace.get(trace_id, []), index)
        for note in loaded:
            labelled[note.file.relpath] = labelled.get(note.file.relpath, 0) + 1
        index.add(home.relpath, graph)
    for relpath, n in labelled.items():
        index.add(relpath, Labels(n))
    return index


# -- files and records -------------------------------------------------------------------------------


def _records(file: SourceFile) -> tuple[list[tuple[str, dict[str, Any]]], str]:
    """The file's records, each with its position (``row N`` of Parquet, ``line N`` of JSON lines,
    ``$[i]`` of a JSON list), and the file's sha256."""
    data = read_bytes(file.path)
    sha256 = file_sha256(data)
    if file.path.suffix == ".parquet":
        return _parquet_records(file, data), sha256
    return _json_records(data), sha256


def _parquet_records(file: SourceFile, data: bytes) -> list[tuple[str, dict[str, Any]]]:
    try:
        table = pq.read_table(pa.BufferReader(data))
    except (pa.ArrowException, OSError) as exc:
        raise IngestError(INVALID_PARQUET, f"not a readable Parquet file: {exc}") from None
    if table.num_rows == 0:
        raise IngestError(NO_RECORDS, "the file holds no rows")
    try:
        names = table.schema.names
    except UnicodeDecodeError:
        raise IngestError(NOT_UTF8, "a column's name is not valid UTF-8") from None
    # times as ns integers: pyarrow would make datetimes of them, which hold only microseconds
    for i, name in enumerate(names):
        time_type = table.schema.field(i).type
        if pa.types.is_timestamp(time_type):
            try:
                ns = pc.cast(table.column(i), pa.timestamp("ns", time_type.tz)).cast(pa.int64())
            except pa.ArrowException as exc:  # a time past what 64-bit ns hold
                raise IngestError(WRONG_FIELD_TYPE, f"column {name}: {exc}", f"$.{name}") from None
            table = table.set_column(i, pa.field(name, pa.int64()), ns)
    index_columns = [name for name in names if name.startswith("__index_level_") and name.endswith("__")]
    try:
        rows = table.to_pylist()
    except (pa.ArrowException, UnicodeDecodeError) as exc:
        raise IngestError(NOT_UTF8 if isinstance(exc, UnicodeDecodeError) else WRONG_FIELD_TYPE, str(exc)) from None
    records = []
    for n, row in enumerate(rows):
        for name in index_columns:  # pandas' unnamed index: the span id the client indexes by, else kept
            if name in row and row[name] in (row.get("context.span_id"), row.get("span_id"), None):
                del row[name]
        records.append((f"row {n}", row))
    return records


def _json_records(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    if not data.strip():
        raise IngestError(EMPTY_FILE, "the file is empty")
    data = data.removeprefix(b"\xef\xbb\xbf")
    stripped = data.lstrip()
    if stripped.startswith(b"["):  # to_json(orient="records") without lines=True
        document = _load(data, None)
        if not isinstance(document, list):
            raise IngestError(WRONG_FIELD_TYPE, "expected a JSON list of records or JSON lines", "$")
        records = [(f"$[{i}]", record) for i, record in enumerate(document)]
    else:
        records = [(f"line {n}", _load(line, n)) for n, line in enumerate(data.splitlines(), start=1) if line.strip()]
    if not records:
        raise IngestError(NO_RECORDS, "the file holds no records")
    return records


def _load(data: bytes, line: int | None) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        at = f"line {line}" if line is not None else f"line {exc.lineno} column {exc.colno}"
        if "UTF-8" in exc.msg or "utf-8" in exc.msg:
            raise IngestError(NOT_UTF8, "the file is not valid UTF-8", first_bad_utf8(data) or at) from None
        raise IngestError(INVALID_JSON, exc.msg, at) from None


def _shape(records: list[tuple[str, Any]], file: SourceFile) -> str:
    """``spans`` or ``annotations``, by the first record's columns."""
    position, first = records[0]
    if not isinstance(first, dict):
        raise IngestError(WRONG_FIELD_TYPE, f"a record must be an object, got {type(first).__name__}", position)
    context = first.get("context")
    if {"context.span_id", "context.trace_id"} <= first.keys() or (
            isinstance(context, dict) and {"span_id", "trace_id"} <= context.keys()):
        return "spans"
    if "span_id" in first and ("annotation_name" in first or {"name", "result"} <= first.keys()):
        return "annotations"
    if "annotation_name" in first:
        raise IngestError(MISSING_KEY, "span annotations without span_id: the client's frame holds span_id as its "
                          "index, which to_json(orient=\"records\") leaves out; save frame.reset_index()", position)
    raise IngestError(MISSING_KEY, f"{file.relpath} is neither Phoenix spans (columns context.span_id and "
                      "context.trace_id) nor span annotations (columns span_id and annotation_name); it has: "
                      f"{', '.join(sorted(first)[:12])}", position)


def _at(position: str, field_name: str) -> str:
    """Where a field of a record is: ``line 3 $.span_id``, ``row 0 $.context.span_id``, ``$[2].result``."""
    return f"{position}.{field_name}" if position.startswith("$") else f"{position} $.{field_name}"


def _missing(value: Any) -> bool:
    """A value pandas writes for a missing one: None, or NaN."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def _flat(prefix: str, value: Any, into: dict[str, Any]) -> None:
    """Phoenix's nested attributes as the dotted keys OpenInference writes: objects by their keys,
    lists of objects by index (``llm.input_messages.0.message.content``); other values as they are."""
    if isinstance(value, dict) and value:
        for key, inner in value.items():
            _flat(f"{prefix}.{key}" if prefix else str(key), inner, into)
    elif isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        for i, item in enumerate(value):
            _flat(f"{prefix}.{i}", item, into)
    elif not _missing(value):
        into[prefix] = value


def _time(value: Any, what: str, position: str) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        for unit in _UNITS_NS:  # ns integers from Parquet pass through the last unit
            if abs(value) * unit < 1 << 63:
                return value * unit
    if isinstance(value, float) and math.isfinite(value):
        return _time(int(value), what, position)
    return time_ns(None if _missing(value) else value, what, position)


def _text_field(record: dict[str, Any], key: str, position: str) -> str | None:
    value = record.get(key)
    if _missing(value):
        return None
    if not isinstance(value, str):
        raise IngestError(WRONG_FIELD_TYPE, f"{key} must be text, got {type(value).__name__}", _at(position, key))
    return value


def _span(record: Any, file: SourceFile, position: str) -> Span:
    """One span of the spans dataframe (flat ``context.*`` and ``attributes.*`` columns) or of the
    REST API (``context`` and ``attributes`` objects)."""
    if not isinstance(record, dict):
        raise IngestError(WRONG_FIELD_TYPE, f"a span must be an object, got {type(record).__name__}", position)
    context = record.get("context") if isinstance(record.get("context"), dict) else {}
    ids = {key: record.get(f"context.{key}", context.get(key)) for key in ("trace_id", "span_id")}
    for key, value in ids.items():
        if _missing(value) or value == "":
            raise IngestError(MISSING_KEY, f"the span has no context.{key}", _at(position, f"context.{key}"))
    trace_id = hex_id(ids["trace_id"], 16, "context.trace_id", _at(position, "context.trace_id"))
    span_id = hex_id(ids["span_id"], 8, "context.span_id", _at(position, "context.span_id"))
    parent = record.get("parent_id")
    parent_id = parent_span_id(None if _missing(parent) else parent, _at(position, "parent_id"))
    attributes: dict[str, Any] = {}
    if isinstance(record.get("attributes"), dict):
        _flat("", record["attributes"], attributes)
    elif not _missing(record.get("attributes")):
        raise IngestError(WRONG_FIELD_TYPE, "attributes must be an object", _at(position, "attributes"))
    for key, value in record.items():
        if key.startswith("attributes."):
            _flat(key.removeprefix("attributes."), value, attributes)
    span_kind = _text_field(record, "span_kind", position)
    if span_kind and "openinference.span.kind" not in attributes:  # Phoenix's own column for it
        attributes["openinference.span.kind"] = span_kind
    raw_events = record.get("events")
    raw_events = [] if _missing(raw_events) else raw_events
    if not isinstance(raw_events, list):
        raise IngestError(WRONG_FIELD_TYPE, "events must be a list", _at(position, "events"))
    events = []
    for k, event in enumerate(raw_events):
        at = _at(position, f"events[{k}]")
        if not isinstance(event, dict):
            raise IngestError(WRONG_FIELD_TYPE, "an event must be an object", at)
        event_attributes: dict[str, Any] = {}
        _flat("", event.get("attributes") or {}, event_attributes)
        events.append({"name": event.get("name"), "time_ns": _time(event.get("timestamp"), "timestamp", at),
                       "attributes": event_attributes})
    name = record.get("name")
    extra = {key: value for key, value in record.items()
             if key not in _SPAN_COLUMNS and not key.startswith(("attributes.", "context.")) and not _missing(value)}
    extra |= {f"context.{key}": value for key, value in context.items() if key not in ("trace_id", "span_id")}
    if "id" in extra:  # the REST API's own id of the span
        extra["phoenix_id"] = extra.pop("id")
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent_id,
        name=None if _missing(name) else str(name),
        kind=None,  # Phoenix keeps the OpenInference kind (span_kind), not the OTel one
        start_ns=_time(record.get("start_time"), "start_time", _at(position, "start_time")),
        end_ns=_time(record.get("end_time"), "end_time", _at(position, "end_time")),
        status=status_of(None if _missing(record.get("status_code")) else record.get("status_code")),
        status_message=_text_field(record, "status_message", position) or None,
        attributes=attributes,
        events=events,
        links=[],
        resource={},
        scope=None,
        file=file,
        position=position,
        extra=_jsonable(extra),
    )


def _jsonable(value: Any) -> Any:
    """Values JSON can hold (Parquet's bytes and dates as text)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# -- annotations -------------------------------------------------------------------------------------


def _annotation(record: Any, file: SourceFile, position: str) -> _Annotation:
    """One span annotation of the annotations dataframe (``result.label`` ...) or of the REST API
    (``name``, ``result`` as an object)."""
    if not isinstance(record, dict):
        raise IngestError(WRONG_FIELD_TYPE, f"an annotation must be an object, got {type(record).__name__}",
                          position)
    if _missing(record.get("span_id")) or record.get("span_id") == "":
        raise IngestError(MISSING_KEY, "the annotation has no span_id", _at(position, "span_id"))
    span_id = hex_id(record["span_id"], 8, "span_id", _at(position, "span_id"))
    fields = dict(record)
    result = fields.pop("result", None)
    if isinstance(result, dict):
        for key, value in result.items():
            fields.setdefault(f"result.{key}", value)
    elif not _missing(result):
        raise IngestError(WRONG_FIELD_TYPE, "result must be an object", _at(position, "result"))
    name_key = "annotation_name" if "annotation_name" in fields else "name"
    name = _text_field(fields, name_key, position)
    label = _text_field(fields, "result.label", position)
    explanation = _text_field(fields, "result.explanation", position)
    annotator = _text_field(fields, "annotator_kind", position)
    score = fields.get("result.score")
    if not _missing(score) and (isinstance(score, bool) or not isinstance(score, int | float)):
        raise IngestError(WRONG_FIELD_TYPE, f"result.score must be a number, got {type(score).__name__}",
                          _at(position, "result.score"))
    mapped = {"span_id", name_key, "result.label", "result.explanation", "result.score"}
    extra = {key: value for key, value in fields.items() if key not in mapped and not _missing(value)}
    extra["score"] = None if _missing(score) else score
    return _Annotation(span_id, {
        "name": name, "label": label, "explanation": explanation,
        "annotator_kind": ANNOTATOR_KINDS.get((annotator or "").upper()),
        "id": None if _missing(fields.get("id")) else str(fields["id"]),
        "extra": _jsonable(extra),
    }, file, position)


def _with_annotations(graph: GraphRows, notes: list[_Annotation],
                      index: _Index) -> tuple[GraphRows, list[_Annotation]]:
    """The graph with its span annotations, and those loaded (a repeated annotation id: an
    identical repeat is kept once and noted, a different one rejected)."""
    if not notes:
        return graph, []
    graphs = graph.tables["graphs"]
    gid, system, dataset = (graphs[name][0].as_py() for name in ("graph_id", "system", "dataset"))
    rows: dict[str, list[Any]] = {f.name: [] for f in schema.ANNOTATIONS}
    seen: dict[str, _Annotation] = {}
    for note in notes:
        row = note.row
        key = f"{gid}#phoenix:{row['id']}" if row["id"] else f"{gid}#phoenix@{note.file.relpath}#{note.position}"
        if key in seen:
            first = seen[key]
            same = first.row == row and first.span_id == note.span_id
            error = IngestError(DUPLICATE_KEY, f"annotation {row['id']} of {note.file.relpath} repeats the one at "
                                f"{first.file.relpath} {first.position}" + (
                                    "; identical, kept once" if same else "; it differs, the first is kept"),
                                f"{note.file.relpath} {note.position}" if same else note.position)
            if same:
                graph.defects.append(error)
            else:
                index.add(note.file.relpath, error)
            continue
        seen[key] = note
        rows["graph_id"].append(gid)
        rows["annotation_id"].append(key)
        rows["system"].append(system)
        rows["dataset"].append(dataset)
        rows["error_type"].append(row["label"])
        rows["taxonomy"].append(row["name"])
        rows["faulty_op_id"].append(note.span_id)
        rows["reason"].append(row["explanation"])
        rows["provenance"].append(PROVENANCE)
        rows["annotator_kind"].append(row["annotator_kind"])
        rows["extra"].append(json.dumps(row["extra"], sort_keys=True, ensure_ascii=False, default=str))
    n = len(rows["graph_id"])
    for name, values in rows.items():
        if not values:
            rows[name] = [None] * n
    annotations = pa.Table.from_pydict(rows, schema=schema.ANNOTATIONS)
    at = graphs.schema.get_field_index("n_annotations")
    graphs = graphs.set_column(at, graphs.schema.field(at), pa.array([n], pa.int64()))
    return GraphRows(graph.tables | {"annotations": annotations, "graphs": graphs}, graph.defects), list(seen.values())


# -- a running Phoenix -------------------------------------------------------------------------------


class PhoenixUnavailable(RuntimeError):
    """A running Phoenix could not be read (the message names the URL and the reason)."""


SPANS_FILE = "spans.jsonl"
ANNOTATIONS_FILE = "span_annotations.jsonl"
PAGE = 1000  # spans per request (the API's maximum)
SPAN_IDS_PER_REQUEST = 100  # span ids per annotations request, as Phoenix's client asks (the URL's length)


@dataclass(frozen=True)
class Snapshot:
    spans: int
    annotations: int
    changed: bool  # whether a file of the folder was rewritten


def project_url(url: str) -> tuple[str, str]:
    """``http://HOST:PORT[/PREFIX]/PROJECT`` -> (the server's base URL, the project's name or id)."""
    parts = urllib.parse.urlsplit(url.rstrip("/"))
    base, _, project = parts.path.rpartition("/")
    if parts.scheme not in ("http", "https") or not parts.netloc or not project:
        raise ValueError(f"{url!r} is not a Phoenix project URL (http://HOST:PORT/PROJECT)")
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, base, "", "")), urllib.parse.unquote(project)


def snapshot(url: str, folder: Path, api_key_variable: str = API_KEY_VARIABLE) -> Snapshot:
    """Save the spans and span annotations of the project at ``url`` (``http://HOST:PORT/PROJECT``)
    into ``folder`` as the REST API gives them (``spans.jsonl``, ``span_annotations.jsonl``), which
    this reader reads. Phoenix's API key, when it asks for one, is read from the environment variable
    ``api_key_variable``, never taken as an argument. A file whose content is unchanged is not
    rewritten, so a build sees only what changed."""
    base, project = project_url(url)
    key = os.environ.get(api_key_variable)
    headers = {"accept": "application/json", **({"authorization": f"Bearer {key}"} if key else {})}
    where = f"{base}/v1/projects/{urllib.parse.quote(project, safe='')}"
    spans = list(_pages(f"{where}/spans", {"limit": PAGE, "sort": "id", "order": "asc"}, headers, url))
    span_ids = sorted({span["context"]["span_id"] for span in spans
                       if isinstance(span.get("context"), dict) and span["context"].get("span_id")})
    annotations = []
    for i in range(0, len(span_ids), SPAN_IDS_PER_REQUEST):
        annotations += _pages(f"{where}/span_annotations",
                              {"span_ids": span_ids[i:i + SPAN_IDS_PER_REQUEST], "limit": PAGE}, headers, url)
    folder.mkdir(parents=True, exist_ok=True)
    changed = [_write_if_changed(folder / name, records)
               for name, records in ((SPANS_FILE, spans), (ANNOTATIONS_FILE, annotations))]
    return Snapshot(len(spans), len(annotations), any(changed))


def _pages(endpoint: str, params: dict[str, Any], headers: dict[str, str], url: str) -> Iterator[dict[str, Any]]:
    """Every record of a paginated endpoint, following ``next_cursor``."""
    cursor = None
    while True:
        query = urllib.parse.urlencode({**params, **({"cursor": cursor} if cursor else {})}, doseq=True)
        request = urllib.request.Request(f"{endpoint}?{query}", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:300]
            hint = " (is the API key's environment variable set?)" if exc.code in (401, 403) else ""
            raise PhoenixUnavailable(f"Phoenix at {url}: {endpoint} answered {exc.code} {exc.reason}{hint}: "
                                     f"{detail}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise PhoenixUnavailable(f"Phoenix at {url}: {endpoint} could not be read: {exc}") from None
        if not isinstance(body, dict) or not isinstance(body.get("data"), list):
            raise PhoenixUnavailable(f"Phoenix at {url}: {endpoint} did not answer with {{\"data\": [...]}}")
        yield from body["data"]
        cursor = body.get("next_cursor")
        if not cursor:
            return


def _write_if_changed(path: Path, records: list[dict[str, Any]]) -> bool:
    """Write the records as JSON lines unless the file holds them already; none: no file (an empty
    one would be an ingest error)."""
    if not records:
        existed = path.exists()
        path.unlink(missing_ok=True)
        return existed
    data = b"".join(orjson.dumps(record) + b"\n" for record in records)
    try:
        if path.read_bytes() == data:
            return False
    except OSError:
        pass
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")  # a hidden name: never listed
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)
    return True


def main(argv: list[str] | None = None) -> int:
    """``python -m pipelines.readers.phoenix http://HOST:PORT/PROJECT FOLDER``: :func:`snapshot`."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m pipelines.readers.phoenix",
                                     description="Save a running Phoenix project's spans and span annotations into "
                                                 "FOLDER, for a phoenix source. An API key is read from "
                                                 f"${API_KEY_VARIABLE}.")
    parser.add_argument("url", help="http://HOST:PORT/PROJECT (the project's name or id)")
    parser.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    try:
        saved = snapshot(args.url, args.folder)
    except (ValueError, PhoenixUnavailable) as exc:
        parser.exit(1, f"{parser.prog}: {exc}\n")
    print(f"{args.folder}: {saved.spans} spans, {saved.annotations} span annotations"
          + ("" if saved.changed else " (unchanged)"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
