"""Reader for Langfuse's blob-storage export, as its "Blob storage export field reference" documents
it: ``{project_id}/observations_v2/`` (enriched observations, any selection of field groups, only
``core`` required), ``scores/``, and the legacy ``traces/`` + ``observations/`` layout; each file
``{timestamp}.parquet``, ``.jsonl``, ``.json`` or ``.csv``, the text formats gzip-compressed or not;
timestamps ``YYYY-MM-DD HH:MM:SS.ffffff`` in UTC.

The observations of one trace and its scores arrive in any of a project's export windows, so a
project folder is one partition (its name the split) read together, trace by trace, as ``otlp``
reads its spans (``reads_partition``). docs/SOURCES.md says the mapping for users:

* one graph per trace, ``graph_id = 'langfuse:' || trace_id``; one operation per observation,
  ``op_id`` = its id (Langfuse ids are kept as they are: any string);
* the observation's input and output are nodes, and information flows between them as in every
  OpenTelemetry trace (pipelines.readers.otel.information_flows);
* a CATEGORICAL or BOOLEAN score on a trace or an observation is an annotation (with the source
  option ``failure_scores``, only those of the names it lists); every other score stays countable in
  its operation's (or graph's) metadata under ``scores``.

Adjacent export windows share their boundary and a record updated later is exported again: a record
seen twice (by id) is loaded once, the one updated last (``updated_at``; ties: the later file), an
enriched observation before a legacy one.
"""

from __future__ import annotations

import csv
import gzip
import io
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from pipelines import schema
from pipelines.readers.base import (
    DANGLING_REFERENCE,
    EMPTY_FILE,
    INVALID_JSON,
    INVALID_PARQUET,
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
    graph_row,
    list_files,
    read_bytes,
    table,
    value_columns,
)
from pipelines.readers.otel import (
    Span,
    combined_sha256,
    edges_of_flows,
    information_flows,
    operations_of_rows,
    time_ns,
)
from pipelines.storage.warehouse import relative_name

kind = "langfuse"
# A trace's observations and scores are spread over a project's files: the ingest hands them together.
reads_partition = True
GRAPH_PREFIX = "langfuse:"
PROVENANCE = "langfuse"
ENRICHED, LEGACY_OBSERVATIONS, LEGACY_TRACES, SCORES = "observations_v2", "observations", "traces", "scores"
TABLE_FOLDERS = (ENRICHED, LEGACY_OBSERVATIONS, LEGACY_TRACES, SCORES)
FORMATS = (".parquet", ".jsonl", ".json", ".csv")  # .gz after the text ones
# Which scores are failure labels: every score of these data types (the documented default), or,
# when a source sets failure_scores, those of them whose name it lists.
LABEL_DATA_TYPES = ("CATEGORICAL", "BOOLEAN")
OPTIONS = {
    "failure_scores": (list, None, "the score names whose CATEGORICAL and BOOLEAN scores are failure labels "
                       "(annotations); default: every CATEGORICAL and BOOLEAN score"),
}
# Langfuse's score source -> annotations.annotator_kind (schema.ANNOTATOR_KINDS).
ANNOTATOR_KINDS = {"ANNOTATION": "human", "EVAL": "llm", "API": "code"}
# Observation fields that become columns or nodes (the rest stay in the operation's metadata), and
# the trace context the enriched export repeats on every observation (kept once, in the graph's).
_MAPPED = {"id", "trace_id", "parent_observation_id", "type", "name", "start_time", "end_time", "status_message",
           "provided_model_name", "input", "output"}
_TRACE_CONTEXT = ("user_id", "session_id", "trace_name", "tags", "release", "bookmarked", "public")


def discover(root: Path, source: str) -> list[SourceFile]:
    """Every export file under ``root``: a file whose folder is one of :data:`TABLE_FOLDERS` and
    whose name ends in one of :data:`FORMATS` (``.gz`` too). Its split is the folder holding the
    table folders (the project's, as Langfuse names it), the root's own name when that is the root.
    ``manifests/`` and anything else are not listed."""
    root = root.absolute()
    if root.is_file():
        return [SourceFile(source, root.parent.parent.name or root.parent.name, root, root.name)]
    found = []
    for path in list_files(root, "**/*"):
        if path.parent.name not in TABLE_FOLDERS or not _format_of(path.name):
            continue
        project = path.parent.parent
        split = root.name if project == root else relative_name(root, project)
        found.append(SourceFile(source, split, path, relative_name(root, path)))
    return found


def _format_of(name: str) -> str | None:
    """parquet, jsonl, json or csv from a file name (``.gz`` for the text formats); None for others."""
    plain = name.removesuffix(".gz")
    for suffix in FORMATS:
        if plain.endswith(suffix) and not (suffix == ".parquet" and plain != name):
            return suffix[1:]
    return None


# -- records ---------------------------------------------------------------------------------------


@dataclass
class Observation:
    id: str
    trace_id: str
    parent_id: str | None
    type: str | None
    name: str | None
    start_ns: int | None
    end_ns: int | None
    status_message: str | None
    model: str | None
    input: str | None
    output: str | None
    context: dict[str, Any]  # the trace context fields it carries
    other: dict[str, Any]  # every other field, as read
    rank: tuple[int, int, str, int]  # which copy of a repeated id wins: enriched, updated_at, file, record
    file: SourceFile
    position: str


@dataclass
class TraceRecord:  # a row of the legacy traces/ file
    id: str
    fields: dict[str, Any]
    rank: tuple[int, int, str, int]
    file: SourceFile
    position: str


@dataclass
class Score:
    id: str
    trace_id: str
    observation_id: str | None
    name: str | None
    data_type: str | None
    value: float | None
    string_value: str | None
    source: str | None
    comment: str | None
    other: dict[str, Any]
    rank: tuple[int, int, str, int]
    file: SourceFile
    position: str


@dataclass
class ParsedFile:
    """One file's records and problems, before its traces are put together with other files'."""

    file: SourceFile
    digest: str | None
    observations: list[Observation] = field(default_factory=list)
    traces: list[TraceRecord] = field(default_factory=list)
    scores: list[Score] = field(default_factory=list)
    problems: list[tuple[IngestError, bool]] = field(default_factory=list)

    @property
    def graph_ids(self) -> list[str]:
        """The graphs (traces) the file holds a record of, in the order of their first record."""
        ids = [r.trace_id for r in self.observations] + [r.id for r in self.traces] + [r.trace_id for r in self.scores]
        return list(dict.fromkeys(GRAPH_PREFIX + trace_id for trace_id in ids))


def parse(file: SourceFile) -> ParsedFile:
    """A file's records; a record that cannot be read is a rejected problem of its own."""
    table_name = file.path.parent.name
    result = ParsedFile(file, None)
    try:
        if table_name not in TABLE_FOLDERS:
            raise IngestError(UNREADABLE, f"a Langfuse export file lies in a folder named {', '.join(TABLE_FOLDERS)} "
                              f"(its table); this one is in {table_name!r}")
        data = read_bytes(file.path)
        result.digest = file_sha256(data)
        for item in _records(file, data):
            if isinstance(item, IngestError):
                result.problems.append((item, True))
                continue
            number, position, record = item
            try:
                _add(result, table_name, record, file, position, (file.relpath, number))
            except IngestError as error:
                result.problems.append((error, True))
    except IngestError as error:
        result.problems.append((error, True))
    else:
        if not (result.observations or result.traces or result.scores or result.problems):
            result.problems.append((IngestError(NO_RECORDS, "the file holds no records"), True))
    return result


def _records(file: SourceFile, data: bytes) -> Iterator[tuple[int, str, dict[str, Any]] | IngestError]:
    """(record number, position, record) of every record of the file in its format."""
    fmt = _format_of(file.path.name)
    if fmt == "parquet":
        yield from _parquet_records(data)
        return
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise IngestError(UNREADABLE, f"the gzip stream is broken: {exc}") from None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if not data.strip():
        raise IngestError(EMPTY_FILE, "the file is empty")
    items = _csv_records(data) if fmt == "csv" else _json_records(data)
    for number, position, record in items:
        if isinstance(record, IngestError):
            yield record
        elif not isinstance(record, dict):
            yield IngestError(WRONG_TOP_LEVEL_TYPE, f"a record must be an object, got {type(record).__name__}",
                              position)
        else:
            yield number, position, record


def _json_records(data: bytes) -> Iterator[tuple[int, str, Any]]:
    """JSON (one array of records) or JSON lines; a file that is one JSON document is read whole."""
    try:
        whole = orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    else:
        if isinstance(whole, dict) and isinstance(whole.get("data"), list):  # {"meta": ..., "data": [...]}
            whole = whole["data"]
        if isinstance(whole, list):
            for i, record in enumerate(whole):
                yield i, f"$[{i}]", record
        else:
            yield 0, "line 1", whole
        return
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            yield number, f"line {number}", orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            if "UTF-8" in exc.msg or "utf-8" in exc.msg:
                bad = first_bad_utf8(line)
                where = f"line {number}" + (f" {bad}" if bad else "")
                error = IngestError(NOT_UTF8, "the line is not valid UTF-8", where)
            else:
                error = IngestError(INVALID_JSON, exc.msg, f"line {number} column {exc.colno}")
            yield number, f"line {number}", error


def _csv_records(data: bytes) -> Iterator[tuple[int, str, Any]]:
    """CSV with a header row: every value text, an empty field null (the reference's CSV notes)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise IngestError(NOT_UTF8, "the file is not valid UTF-8", f"byte {exc.start}") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
        for number, row in enumerate(reader, start=1):
            if not any(row):
                continue
            if len(row) != len(header):
                yield number, f"row {number}", IngestError(
                    WRONG_TOP_LEVEL_TYPE, f"the row has {len(row)} fields, the header {len(header)}", f"row {number}")
                continue
            yield number, f"row {number}", {k: (v if v != "" else None) for k, v in zip(header, row, strict=True)}
    except csv.Error as exc:
        raise IngestError(WRONG_TOP_LEVEL_TYPE, f"not CSV: {exc}", f"row {reader.line_num}") from None


def _parquet_records(data: bytes) -> Iterator[tuple[int, str, dict[str, Any]]]:
    try:
        parquet = pq.ParquetFile(pa.BufferReader(data))
        number = 0
        for batch in parquet.iter_batches():
            for record in batch.to_pylist():
                number += 1
                yield number, f"row {number}", record
    except (pa.ArrowException, OSError) as exc:
        raise IngestError(INVALID_PARQUET, f"the Parquet file cannot be read: {exc}") from None


# -- fields, as the reference types them (text in CSV, Arrow types in Parquet) --------------------------


def _text_of(record: dict[str, Any], key: str, position: str, *, id_like: bool = False) -> str | None:
    """A string field; empty or absent is None. Ids may also be written as integers."""
    value = record.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return value
    if id_like and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise IngestError(WRONG_FIELD_TYPE, f"field {key!r} must be a string, got {type(value).__name__}", position)


def _payload(record: dict[str, Any], key: str) -> str | None:
    """input / output: a string as written (empty: not set); anything else as its JSON text."""
    value = record.get(key)
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else _json_text(value)


def _time(record: dict[str, Any], key: str, position: str) -> int | None:
    """A timestamp in ns: ``YYYY-MM-DD HH:MM:SS.ffffff`` UTC (ISO 8601 too), or a Parquet timestamp."""
    value = record.get(key)
    if isinstance(value, datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        value = moment.isoformat()
    return time_ns(value, f"field {key!r}", position)


def _number(record: dict[str, Any], key: str, position: str) -> float | None:
    value = record.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return value
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise IngestError(WRONG_FIELD_TYPE, f"field {key!r} must be a number, got {value!r}", position)


# Fields the reference types as numbers or booleans: CSV writes them as text.
_NUMBER_FIELDS = frozenset({"total_cost", "latency", "time_to_first_token", "prompt_version"})
_BOOLEAN_FIELDS = frozenset({"bookmarked", "public", "is_root_observation"})
# Object fields; Parquet writes the maps among them as lists of key-value pairs (an empty one: []).
_OBJECT_FIELDS = ("usage_details", "cost_details", "metadata", "tool_definitions")


def _typed(key: str, value: Any) -> Any:
    """A field kept in metadata as the reference types it: :func:`_structured`, and a number or
    boolean written as text (CSV) as a number or boolean; text that is neither stays text."""
    if key in _OBJECT_FIELDS and isinstance(value, list) and not value:
        return {}
    if isinstance(value, str):
        if key in _NUMBER_FIELDS:
            try:
                number = float(value)
            except ValueError:
                return value
            return int(number) if number.is_integer() and key == "prompt_version" else number
        if key in _BOOLEAN_FIELDS and value.lower() in ("true", "false"):
            return value.lower() == "true"
    return _structured(value)


def _structured(value: Any) -> Any:
    """An object or array field as a Python value: JSON text (CSV, Parquet string columns) parsed,
    a Parquet map (a list of key-value pairs) as a dict; text that is not JSON stays text."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    if isinstance(value, list) and value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
        return {k: v for k, v in value}
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def _json_text(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str).decode()


def _count(usage: Any, key: str) -> int | None:
    value = usage.get(key) if isinstance(usage, dict) else None
    if isinstance(value, bool) or value is None:
        return None
    if (isinstance(value, float) and value.is_integer()) or (isinstance(value, str) and value.strip().isdigit()):
        value = int(value)
    return value if isinstance(value, int) and -(1 << 63) <= value < 1 << 63 else None


def _rank(enriched: bool, updated: int | None, where: tuple[str, int]) -> tuple[int, int, str, int]:
    return (int(enriched), -(1 << 63) if updated is None else updated, *where)


def _require(record: dict[str, Any], key: str, position: str) -> str:
    value = _text_of(record, key, position, id_like=True)
    if value is None:
        raise IngestError(MISSING_KEY, f"missing required field {key!r}", position)
    return value


def _add(result: ParsedFile, table_name: str, record: dict[str, Any], file: SourceFile, position: str,
         where: tuple[str, int]) -> None:
    """Type one record of ``table_name`` into ``result``; a field that is not what the reference says
    rejects the record, naming it."""
    if table_name == SCORES:
        result.scores.append(_score(record, file, position, where))
    elif table_name == LEGACY_TRACES:
        trace_id = _require(record, "id", position)
        fields = {k: _typed(k, v) for k, v in record.items() if k != "id" and v is not None}
        result.traces.append(TraceRecord(trace_id, fields, _rank(True, _time(record, "updated_at", position), where),
                                         file, position))
    else:
        result.observations.append(_observation(record, table_name == ENRICHED, file, position, where))


def _observation(record: dict[str, Any], enriched: bool, file: SourceFile, position: str,
                 where: tuple[str, int]) -> Observation:
    obs_id = _require(record, "id", position)
    trace_id = _require(record, "trace_id", position)
    start, end = _time(record, "start_time", position), _time(record, "end_time", position)
    for key in ("completion_start_time", "created_at"):
        _time(record, key, position)  # checked: a bad timestamp names its field
    context = {k: _typed(k, record[k]) for k in _TRACE_CONTEXT if record.get(k) not in (None, "")}
    other = {k: _typed(k, v) for k, v in record.items()
             if k not in _MAPPED and k not in _TRACE_CONTEXT and v is not None}
    for key in _OBJECT_FIELDS:
        if key in other and not isinstance(other[key], dict | str):
            raise IngestError(WRONG_FIELD_TYPE, f"field {key!r} must be an object, got {type(other[key]).__name__}",
                              position)
    return Observation(
        id=obs_id, trace_id=trace_id,
        parent_id=_text_of(record, "parent_observation_id", position, id_like=True),
        type=_text_of(record, "type", position), name=_text_of(record, "name", position),
        start_ns=start, end_ns=end,
        status_message=_text_of(record, "status_message", position),
        model=_text_of(record, "provided_model_name", position),
        input=_payload(record, "input"), output=_payload(record, "output"),
        context=context, other=other,
        rank=_rank(enriched, _time(record, "updated_at", position), where), file=file, position=position)


def _score(record: dict[str, Any], file: SourceFile, position: str, where: tuple[str, int]) -> Score:
    score_id = _require(record, "id", position)
    trace_id = _text_of(record, "trace_id", position, id_like=True)
    name = _text_of(record, "name", position)
    if trace_id is None:
        on = ", ".join(f"{k} {record[k]}" for k in ("session_id", "dataset_run_id") if record.get(k)) or "nothing"
        raise IngestError(DANGLING_REFERENCE, f"score {score_id} ({name}) is on no trace (field 'trace_id' is null; "
                          f"it is on {on}): tracehouse keeps scores of traces and observations", position)
    data_type = _text_of(record, "data_type", position)
    mapped = {"id", "trace_id", "observation_id", "name", "data_type", "value", "string_value", "source", "comment"}
    return Score(
        id=score_id, trace_id=trace_id,
        observation_id=_text_of(record, "observation_id", position, id_like=True),
        name=name, data_type=None if data_type is None else data_type.upper(),
        value=_number(record, "value", position),
        string_value=_text_of(record, "string_value", position),
        source=_text_of(record, "source", position), comment=_text_of(record, "comment", position),
        other={k: _typed(k, v) for k, v in record.items() if k not in mapped and v is not None},
        rank=_rank(True, _time(record, "updated_at", position), where), file=file, position=position)


# -- traces ------------------------------------------------------------------------------------------


def read(file: SourceFile, options: dict[str, Any] | None = None) -> Iterator[GraphRows | IngestError]:
    """One file on its own (the ingest reads a langfuse partition with :func:`read_traces`)."""
    for _, item, _, _ in read_traces([file], options=options):
        yield item


def read_traces(
    files: list[SourceFile], parsed: dict[str, ParsedFile] | None = None, only: set[str] | None = None,
    options: dict[str, Any] | None = None,
) -> Iterator[tuple[SourceFile, GraphRows | IngestError, bool, str | None]]:
    """Every trace of ``files`` as one graph, with the file it is said to come from (the first, in
    path order, holding one of its records), and every problem with its file, whether it rejected
    something, and the graph it concerns (None for a problem of the file itself, which come first).
    ``parsed``: files already parsed (by path); ``only``: the graph ids to put together (None: all);
    ``options``: the source's (:data:`OPTIONS`; unset ones their defaults)."""
    selected = (options or {}).get("failure_scores")
    failure_scores = None if selected is None else frozenset(selected)
    parsed = parsed or {}
    results = []
    for file in files:
        result = parsed.get(file.relpath) or parse(file)
        results.append(result)
        for error, rejected in result.problems:
            yield file, error, rejected, None
    observations: dict[str, list[Observation]] = {}
    traces: dict[str, list[TraceRecord]] = {}
    scores: dict[str, list[Score]] = {}
    holders: dict[str, list[str]] = {}  # graph id -> the files holding a record of it, in path order
    for result in results:
        for gid in result.graph_ids:
            if only is None or gid in only:
                holders.setdefault(gid, []).append(result.file.relpath)
        for obs in result.observations:
            observations.setdefault(obs.trace_id, []).append(obs)
        for trace in result.traces:
            traces.setdefault(trace.id, []).append(trace)
        for score in result.scores:
            scores.setdefault(score.trace_id, []).append(score)
    digests = {r.file.relpath: r.digest for r in results if r.digest is not None}
    by_path = {f.relpath: f for f in files}
    for gid, paths in holders.items():
        trace_id = gid.removeprefix(GRAPH_PREFIX)
        home = by_path[paths[0]]
        try:
            sha256 = digests[home.relpath] if len(paths) == 1 else combined_sha256([(p, digests[p]) for p in paths])
            graph, problems = trace_graph(trace_id, observations.get(trace_id, []), traces.get(trace_id, []),
                                          scores.get(trace_id, []), home, sha256, paths, failure_scores)
        except IngestError as error:
            yield home, error, True, gid
            continue
        except Exception as exc:  # noqa: BLE001 - a reader bug loses this trace only, named, not the partition
            yield home, IngestError(READER_FAILURE, f"trace {trace_id}: {type(exc).__name__}: {exc}"), True, gid
            continue
        for file, problem, rejected in problems:
            yield file, problem, rejected, gid
        if graph is not None:
            yield home, graph, False, gid


def _latest[T: (Observation, TraceRecord, Score)](records: list[T]) -> list[T]:
    """One record per id, the one :attr:`rank` puts last, in the order ids were first seen."""
    kept: dict[str, T] = {}
    for record in records:
        if record.id not in kept or record.rank >= kept[record.id].rank:
            kept[record.id] = record
    return list(kept.values())


def is_failure_label(score: Score, failure_scores: frozenset[str] | None = None) -> bool:
    """Whether a score is a failure label (an annotation): its data type is CATEGORICAL or BOOLEAN and,
    when the source names its failure scores (``failure_scores``), its name is one of them."""
    return score.data_type in LABEL_DATA_TYPES and (failure_scores is None or score.name in failure_scores)


def trace_graph(
    trace_id: str, observations: list[Observation], trace_rows: list[TraceRecord], scores: list[Score],
    home: SourceFile, sha256: str, files: list[str], failure_scores: frozenset[str] | None = None,
) -> tuple[GraphRows | None, list[tuple[SourceFile, IngestError, bool]]]:
    """The canonical rows of one trace, and its problems (file, error, rejected). A trace without
    observations in the export gives no graph: its trace row and scores are rejected, named.
    ``failure_scores``: the score names that are failure labels (None: every label type's)."""
    gid = GRAPH_PREFIX + trace_id
    obs = sorted(_latest(observations), key=lambda o: (o.start_ns is None, o.start_ns or 0, o.id))
    trace = max(trace_rows, key=lambda t: t.rank) if trace_rows else None
    labels = _latest(scores)
    problems: list[tuple[SourceFile, IngestError, bool]] = []
    if not obs:
        why = "the export holds no observation of it (in an export window not read, or of another project?)"
        if trace is not None:
            problems.append((trace.file, IngestError(DANGLING_REFERENCE, f"trace {trace_id}: {why}; not loaded",
                                                     trace.position), True))
        problems.extend((s.file, IngestError(DANGLING_REFERENCE, f"score {s.id} ({s.name}) is on trace {trace_id}: "
                                             f"{why}; not loaded", s.position), True) for s in labels)
        return None, problems
    by_id = {o.id: o for o in obs}
    for o in obs:
        if o.parent_id is not None and o.parent_id not in by_id:
            problems.append((o.file, IngestError(
                DANGLING_REFERENCE, f"observation {o.id} names parent {o.parent_id}, which trace {trace_id} does not "
                "hold (not exported yet?); loaded as a root", o.position), False))

    context: dict[str, Any] = {}
    if trace is not None:  # the legacy traces/ row: the trace's name there is trace_name here
        context |= {k: trace.fields[k] for k in _TRACE_CONTEXT if trace.fields.get(k) not in (None, "")}
        if trace.fields.get("name") not in (None, ""):
            context["trace_name"] = trace.fields["name"]
    for o in obs:
        for key, value in o.context.items():
            context.setdefault(key, value)
    session = None if context.get("session_id") is None else str(context["session_id"])

    def actor(o: Observation) -> str | None:  # the name of the nearest AGENT observation, itself or above
        seen: set[str] = set()
        current: Observation | None = o
        while current is not None and current.id not in seen:
            seen.add(current.id)
            if current.type == "AGENT" and current.name:
                return current.name
            current = by_id.get(current.parent_id) if current.parent_id else None
        return None

    op_scores: dict[str, list[dict[str, Any]]] = {}
    trace_scores: list[dict[str, Any]] = []
    annotations: list[tuple[Score, str | None]] = []
    for s in labels:
        if s.observation_id is not None and s.observation_id not in by_id:
            problems.append((s.file, IngestError(
                DANGLING_REFERENCE, f"score {s.id} ({s.name}) is on observation {s.observation_id}, which trace "
                f"{trace_id} does not hold; not loaded", s.position), True))
        elif is_failure_label(s, failure_scores):
            annotations.append((s, s.observation_id))
        else:
            kept = op_scores.setdefault(s.observation_id, []) if s.observation_id else trace_scores
            kept.append(_score_fields(s))

    node_rows: list[dict[str, Any]] = []
    io: dict[str, tuple[list[str], list[str]]] = {}
    op_rows: list[dict[str, Any]] = []
    spans: list[Span] = []
    for step, o in enumerate(obs):
        ins, outs = [], []
        for value, is_input in ((o.input, True), (o.output, False)):
            if value is None:
                continue
            what = "input" if is_input else "output"
            node_id = f"{what}:{o.id}@1"
            (ins if is_input else outs).append(node_id)
            node_rows.append({"id": node_id, "name": what, "value": value,
                              "time": o.start_ns if is_input else (o.end_ns if o.end_ns is not None else o.start_ns),
                              "metadata": {"field": what, "observation_type": o.type}})
        io[o.id] = (ins, outs)
        spans.append(Span(trace_id=trace_id, span_id=o.id, parent_id=o.parent_id if o.parent_id in by_id else None,
                          name=o.name, kind=None, start_ns=o.start_ns, end_ns=o.end_ns, status="unset",
                          status_message=o.status_message, attributes={}, events=[], links=[], resource={},
                          scope=None, file=o.file, position=o.position))
        level = o.other.get("level")
        metadata = {**o.other, **({"scores": op_scores[o.id]} if o.id in op_scores else {})}
        op_rows.append({
            "op_id": o.id, "op_name": o.name, "category": o.type, "session_id": session, "actor": actor(o),
            "step": step, "created_at": _ms(o.start_ns), "metadata": _json_text(metadata),
            "parent_op_id": o.parent_id, "start_time": _us(o.start_ns), "end_time": _us(o.end_ns),
            "status": "error" if isinstance(level, str) and level.upper() == "ERROR" else "unset",
            "status_message": o.status_message, "model": o.model,
            "input_tokens": _count(o.other.get("usage_details"), "input"),
            "output_tokens": _count(o.other.get("usage_details"), "output"),
        })
    flows = information_flows(spans, io)

    values = pa.array([n["value"] for n in node_rows], type=pa.large_string())
    n_nodes = len(node_rows)
    nodes_table = table(schema.NODES, {
        "graph_id": [gid] * n_nodes, "full_node_id": [n["id"] for n in node_rows],
        "name": [n["name"] for n in node_rows], "class_name": [n["name"] for n in node_rows],
        "version": [1] * n_nodes, "category": [n["name"] for n in node_rows], "session_id": [session] * n_nodes,
        "value": values, **value_columns(values),
        "created_at": pa.array([_ms(n["time"]) for n in node_rows], type=pa.int64()).cast(schema.TIMESTAMP),
        "metadata": [_json_text(n["metadata"]) for n in node_rows],
    })
    edges_table = edges_of_flows(gid, flows, dict.fromkeys((op for _, _, op, _ in flows), session),
                                 {o.id: o.start_ns for o in obs})
    operations_table = operations_of_rows(gid, op_rows)
    first_start = min((o.start_ns for o in obs if o.start_ns is not None), default=None)
    sessions_table = table(schema.SESSIONS, {
        "graph_id": [gid] * (session is not None), "session_id": [session] if session else [],
        "session_name": [session] if session else [], "category": ["session"] if session else [],
        "created_at": pa.array([_ms(first_start)] if session else [], type=pa.int64()).cast(schema.TIMESTAMP),
        "ordinal": [0] if session else [],
    })
    system = str(context.get("trace_name") or home.source)
    project = next((o.other["project_id"] for o in obs if o.other.get("project_id")), None)
    if project is None and trace is not None:
        project = trace.fields.get("project_id")
    annotations_table = _annotations(gid, system, annotations)
    tables = {"sessions": sessions_table, "nodes": nodes_table, "edges": edges_table,
              "operations": operations_table, "annotations": annotations_table}
    counts = {name: tables[name].num_rows for name in schema.COUNT_COLUMNS}
    root = next((o for o in obs if o.parent_id is None), obs[0])
    graph_metadata = {
        "trace_id": trace_id, "root_observation_id": root.id,
        **{k: v for k, v in context.items() if k not in ("user_id", "session_id")},
        **({"environment": root.other["environment"]} if root.other.get("environment") else {}),
        **({"trace": {k: v for k, v in trace.fields.items() if k not in _TRACE_CONTEXT and k != "name"}}
           if trace is not None else {}),
        **({"scores": trace_scores} if trace_scores else {}),
    }
    created = first_start
    if created is None and trace is not None:
        created = time_ns(trace.fields.get("timestamp"), "field 'timestamp'", trace.position)
    graph = graph_row(
        graph_id=gid, file=home, sha256=sha256, system=system, dataset=schema.UNKNOWN,
        user_id=None if context.get("user_id") is None else str(context["user_id"]),
        project_id=str(project) if project else home.split,
        created_at=pa.array([_ms(created)], type=pa.int64()).cast(schema.TIMESTAMP),
        counts=counts, metadata=_json_text(graph_metadata))
    graph = graph.set_column(graph.schema.get_field_index("files"), schema.GRAPHS.field("files"),
                             pa.array([files], type=pa.list_(pa.string())))
    tables["graphs"] = graph
    return GraphRows({name: tables[name] for name in schema.GRAPH_TABLES}), problems


def _score_fields(score: Score) -> dict[str, Any]:
    """A score as it is kept in metadata (those that are not failure labels)."""
    return {"id": score.id, "name": score.name, "data_type": score.data_type, "value": score.value,
            "string_value": score.string_value, "source": score.source, "comment": score.comment, **score.other}


def label_of(score: Score) -> str | None:
    """A failure label's error_type: its string value; a BOOLEAN without one: True / False from its value."""
    if score.string_value is not None:
        return score.string_value
    if score.data_type == "BOOLEAN" and score.value in (0, 1):
        return "True" if score.value == 1 else "False"
    return None if score.value is None else str(score.value)


def _annotations(gid: str, system: str, labelled: list[tuple[Score, str | None]]) -> pa.Table:
    n = len(labelled)
    return table(schema.ANNOTATIONS, {
        "graph_id": [gid] * n,
        "annotation_id": [f"{gid}#score:{s.id}" for s, _ in labelled],
        "system": [system] * n, "dataset": [schema.UNKNOWN] * n,
        "error_type": [label_of(s) for s, _ in labelled],
        "taxonomy": [s.name for s, _ in labelled],
        "faulty_op_id": [op for _, op in labelled],
        "reason": [s.comment for s, _ in labelled],
        "provenance": [PROVENANCE] * n,
        "annotator_kind": [ANNOTATOR_KINDS.get((s.source or "").upper()) for s, _ in labelled],
        "extra": [_json_text({"source": s.source, "score_id": s.id, "data_type": s.data_type, "value": s.value,
                              "string_value": s.string_value, **s.other}) for s, _ in labelled],
    })


def _ms(ns: int | None) -> int | None:
    return None if ns is None else ns // 1_000_000


def _us(ns: int | None) -> int | None:
    return None if ns is None else ns // 1_000
