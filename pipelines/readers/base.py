"""What every source reader shares: the files it found, the rows it yields, the errors it raises.

A reader is a small module with two functions:

* ``discover(root) -> list[SourceFile]``: every input file under ``root``, each with its split;
* ``read(file) -> Iterator[GraphRows]``: the canonical rows of each graph in that file.

A defect that makes a file unusable raises :class:`IngestError`; the ingest loop records it in
``ingest_errors`` and goes on with the next file. Readers never print and never drop rows.

A reader whose graphs span files (``otlp``: a trace spread over batches) sets ``reads_partition =
True`` and has ``parse(file)`` and ``read_traces(files, parsed, only) -> Iterator[(file, GraphRows |
IngestError, rejected, graph id)]``: the ingest then hands it the files of the partition together,
only those holding a graph that changed when it can (pipelines.builds.ingest._read_partition).

A reader that takes options from its source's table in tracehouse.toml declares them in a module-level
``OPTIONS = {name: (type, default, description)}`` (type ``str``, ``bool``, ``int`` or ``list``: a
list of strings) and is then called as ``read(file, options=...)`` (and ``read_traces(..., options=...)``)
with every option it declares, set or default (:func:`reader_options`). Options a source sets are part
of its partitions' fingerprint (pipelines.builds.changes.partition_context): changing one re-reads them.
"""

from __future__ import annotations

import errno
import fnmatch
import hashlib
import os
import stat as stat_mode
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from pipelines import schema
from pipelines.native import utf8_view
from pipelines.on_thread import OnThread
from pipelines.storage.warehouse import relative_name

# The kinds of ingest error (sql/seeds/ingest_error_kinds.csv), named through the seed's accessor:
# a kind the seed does not list fails here, at import, not when a bad file first turns up.
UNREADABLE = schema.ingest_error_kind("unreadable")
EMPTY_FILE = schema.ingest_error_kind("empty_file")
NO_RECORDS = schema.ingest_error_kind("no_records")
INVALID_JSON = schema.ingest_error_kind("invalid_json")
INVALID_PARQUET = schema.ingest_error_kind("invalid_parquet")
NOT_UTF8 = schema.ingest_error_kind("not_utf8")
WRONG_TOP_LEVEL_TYPE = schema.ingest_error_kind("wrong_top_level_type")
MISSING_KEY = schema.ingest_error_kind("missing_key")
WRONG_FIELD_TYPE = schema.ingest_error_kind("wrong_field_type")
DUPLICATE_KEY = schema.ingest_error_kind("duplicate_key")
DANGLING_REFERENCE = schema.ingest_error_kind("dangling_reference")
DUPLICATE_GRAPH_ID = schema.ingest_error_kind("duplicate_graph_id")
UNKNOWN_CASE = schema.ingest_error_kind("unknown_case")
AMBIGUOUS_CASE = schema.ingest_error_kind("ambiguous_case")
DUPLICATE_PREDICTION = schema.ingest_error_kind("duplicate_prediction")
INVALID_ID = schema.ingest_error_kind("invalid_id")
UNLABELLED_TRAJECTORY = schema.ingest_error_kind("unlabelled_trajectory")
CONFLICTING_LABELS = schema.ingest_error_kind("conflicting_labels")
READER_FAILURE = schema.ingest_error_kind("reader_failure")
BROKEN_LINK = schema.ingest_error_kind("broken_link")
HIDDEN_NAME = schema.ingest_error_kind("hidden_name")

# What the tool writes into a source folder of its own (tracehouse fetch's record of what it
# downloaded, pipelines.storage.hub.RECORD): not a source file, so neither read nor reported.
OWN_FILES = frozenset({".tracehouse-fetch.json"})


@dataclass(frozen=True)
class FileStamp:
    """What a file looks like to the change detection: its size and mtime, or, for a file that
    cannot be opened (:attr:`SourceFile.problem`), size 0 and mtime -1, which no readable file has:
    a link whose target vanishes changes its partition's fingerprint although the link did not."""

    st_size: int
    st_mtime_ns: int


@dataclass(frozen=True)
class SourceFile:
    """One input file of a source, with the split (partition) it belongs to."""

    source: str  # source name, e.g. "memtracebench" (also the reader kind unless configured)
    split: str
    path: Path  # absolute path
    relpath: str  # path relative to the source root, with forward slashes

    @cached_property
    def problem(self) -> IngestError | None:
        """Why this listed file is not read, or None: the ingest rejects it with this error (a link
        whose target is gone, a loop of links, a name starting with "."), so that no file the
        listing saw is dropped without a row in ``ingest_errors``. Decided once per listing."""
        return unlisted_reason(self.path)

    def stat(self) -> FileStamp:
        if self.problem is not None and self.problem.kind != HIDDEN_NAME:
            return FileStamp(0, -1)
        found = self.path.stat()
        return FileStamp(found.st_size, found.st_mtime_ns)

    @property
    def size(self) -> int:
        return self.stat().st_size


class IngestError(Exception):
    """A file (or one record in it) that cannot be loaded; becomes a row of ``ingest_errors``."""

    def __init__(self, kind: str, reason: str, position: str | None = None) -> None:
        super().__init__(f"{kind}: {reason}" + (f" (at {position})" if position else ""))
        self.kind = schema.ingest_error_kind(kind)  # a literal kind the seed does not list is a bug, named here
        self.reason = reason
        self.position = position

    def __reduce__(self) -> tuple[type[IngestError], tuple[str, str, str | None]]:
        # pickled with its own arguments (a SourceFile's cached problem may travel to a worker)
        return (IngestError, (self.kind, self.reason, self.position))


@dataclass
class GraphRows:
    """The canonical rows of one graph: one pyarrow table per graph table.

    ``defects`` are problems found in a graph that was loaded anyway; each becomes an
    ``ingest_errors`` row with ``rejected = false``. (A rejected record of a multi-record file is
    yielded by the reader as an IngestError of its own.)
    """

    tables: dict[str, pa.Table]
    defects: list[IngestError] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tables = with_keys(self.tables)

    @property
    def graph_id(self) -> str:
        return self.tables["graphs"]["graph_id"][0].as_py()


def graph_key(graph_id: str) -> int:
    """A graph's 64-bit key: the first 8 bytes of the BLAKE2b digest of its id, as a signed integer
    (the same in every process and on every machine). A check refuses a build where two graphs
    share one."""
    return int.from_bytes(hashlib.blake2b(graph_id.encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                          "big", signed=True)


def with_keys(tables: dict[str, pa.Table]) -> dict[str, pa.Table]:
    """A graph's tables with the integer keys the marts join on, made here for every reader: the
    graph's key in graphs, nodes and edges, each node's index in its graph (its position in
    ``nodes``), and the indices of each edge's two nodes. A walk over the edges then joins on two
    integers instead of two strings (failure_propagation at 10 M nodes: docs/MARTS.md)."""
    key = graph_key(tables["graphs"]["graph_id"][0].as_py())
    nodes, edges = tables["nodes"], tables["edges"]
    ids = nodes["full_node_id"]

    def put(table: pa.Table, column: str, values: Any) -> pa.Table:
        return table.set_column(table.schema.get_field_index(column), table.schema.field(column), values)

    def repeated(n: int) -> pa.Array:
        return pa.repeat(pa.scalar(key, pa.int64()), n)

    def index_of(column: str) -> pa.Array:  # the reader checked that both ends exist
        return pc.index_in(edges[column], value_set=ids).cast(pa.int64())

    nodes = put(put(nodes, "graph_key", repeated(nodes.num_rows)), "node_index",
                pa.array(range(nodes.num_rows), pa.int64()))
    edges = put(edges, "graph_key", repeated(edges.num_rows))
    edges = put(edges, "source_node_index", index_of("source_full_node_id"))
    edges = put(edges, "target_node_index", index_of("target_full_node_id"))
    return {**tables, "graphs": put(tables["graphs"], "graph_key", repeated(tables["graphs"].num_rows)),
            "nodes": nodes, "edges": edges}


@dataclass
class Rows:
    """Rows of a file that holds no graph (a prediction source): tables by name. ``key`` names
    what the rows are about (a prediction's annotation), so a repeat can be quarantined, and
    ``position`` where in the file they come from."""

    tables: dict[str, pa.Table]
    key: str | None = None
    position: str | None = None


@dataclass
class Labels:
    """What a file of labels yields when its labels are loaded with the graphs they label, which
    another file of the partition holds (AgentRx's ground_truth/*.json): the number of labelled
    trajectories it names, counted in its manifest entry so that the file is accounted for."""

    n: int


OptionSpec = tuple[type, Any, str]  # (type, default, what it means): an entry of a reader's OPTIONS


def declared_options(reader: Any) -> dict[str, OptionSpec]:
    """The options a reader module declares (none: an empty mapping)."""
    return dict(getattr(reader, "OPTIONS", {}))


def option_problem(kind: str, declared: dict[str, OptionSpec], name: str, value: Any) -> str | None:
    """Why ``value`` cannot be option ``name`` of a ``kind`` reader declaring ``declared``, or None."""
    if name not in declared:
        known = f"known: {', '.join(sorted(declared))}" if declared else f"kind {kind} takes no options"
        return f"unknown option {name!r} for kind {kind} ({known})"
    wanted = declared[name][0]
    if wanted is list:
        ok = isinstance(value, list | tuple) and all(isinstance(item, str) for item in value)
        what = "a list of strings"
    elif wanted is int:
        ok, what = isinstance(value, int) and not isinstance(value, bool), "an integer"
    else:
        ok, what = isinstance(value, wanted), {str: "a string", bool: "true or false"}.get(wanted, wanted.__name__)
    return None if ok else f"option {name!r} of kind {kind} must be {what}, got {value!r}"


def reader_options(reader: Any, given: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every option ``reader`` declares: the value ``given`` (a source's options, checked when the
    source was declared), else its default; lists as lists."""
    given = given or {}
    return {name: list(given[name]) if name in given and isinstance(given[name], tuple) else given.get(name, default)
            for name, (_, default, _) in declared_options(reader).items()}


class WithOptions:
    """A reader module whose ``read`` and ``read_traces`` are called with a source's options
    (:func:`with_options`); every other attribute is the module's."""

    def __init__(self, reader: Any, options: dict[str, Any]) -> None:
        self.reader, self.options = reader, options

    def __getattr__(self, name: str) -> Any:
        return getattr(self.reader, name)

    def read(self, file: SourceFile, *args: Any) -> Iterator[Any]:
        return self.reader.read(file, *args, options=self.options)

    def read_traces(self, *args: Any) -> Iterator[Any]:
        return self.reader.read_traces(*args, options=self.options)


def with_options(reader: Any, given: dict[str, Any] | None = None) -> Any:
    """``reader`` as the ingest calls it for a source setting ``given``: a reader declaring OPTIONS is
    handed them all (:func:`reader_options`); any other is itself."""
    return WithOptions(reader, reader_options(reader, given)) if declared_options(reader) else reader


class Reader(Protocol):
    kind: str

    def discover(self, root: Path, source: str) -> list[SourceFile]: ...

    def read(self, file: SourceFile) -> Iterator[GraphRows | IngestError]: ...


@dataclass(frozen=True)
class Case:
    """A failure annotation a prediction can name: what it is and where its graph came from."""

    annotation_id: str
    graph_id: str
    system: str
    dataset: str
    source: str
    kind: str  # the reader kind of its source
    split: str
    file_name: str  # the graph file's name, without folders
    query_id: str | None


@dataclass
class Cases:
    """The annotations of the graph sources, indexed the ways the prediction formats name them; the
    prediction readers resolve against it (pipelines.analytics.attribution.load_cases builds it)."""

    cases: list[Case]
    graphs: list[tuple[str, str, str, str, str]]  # (graph_id, source, kind, split, file_name)
    digest: str = ""
    # OpenTelemetry traces (graph id otel:<trace id>) -> (system, dataset, their span ids): where a
    # label source (trail_labels) locates its labels
    spans: dict[str, tuple[str, str, frozenset[str]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_query: dict[tuple[str, str, str | None], list[Case]] = {}
        self.by_file: dict[tuple[str, str], list[Case]] = {}
        self.by_id: dict[str, list[Case]] = {}
        for case in self.cases:
            self.by_query.setdefault((case.split, case.file_name, case.query_id), []).append(case)
            self.by_file.setdefault((case.split, case.file_name), []).append(case)
            self.by_id.setdefault(case.annotation_id, []).append(case)

    def graphs_of(self, kinds: set[str], split: str | None = None, file_name: str | None = None,
                  sources: set[str] | None = None) -> list[str]:
        """Graph ids of the given source kinds (and split, file name, sources)."""
        return [gid for gid, source, kind, s, name in self.graphs
                if kind in kinds and (split is None or s == split) and (file_name is None or name == file_name)
                and (sources is None or source in sources)]


# ---------------------------------------------------------------------------------------------
# Helpers shared by readers


def file_sha256(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def path_sha256(path: Path) -> str:
    """sha256 of a file read in chunks, for files that are not read whole (Parquet, unchanged inputs)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def list_files(root: Path, pattern: str) -> list[Path]:
    """Names matching ``pattern`` (``**/NAME-GLOB``) at any depth under ``root``, sorted by relative
    path. Every matching name is listed, also one the reader will not read (a link whose target is
    gone, a loop of links, a hidden name, a fifo): :attr:`SourceFile.problem` says why, and the
    ingest puts it in ``ingest_errors``, so a vanished target is not a silently vanished graph.
    Folders whose name starts with "." (.git, a Hub download's .cache) are not entered; linked
    folders are, unless they lead back to a folder above them (a loop, which would list files
    already listed). One os.walk, as this runs on every build: Path.glob walks slower."""
    name_glob = pattern.removeprefix("**/")
    found: list[tuple[str, Path]] = []
    for folder, dirs, names in os.walk(root, followlinks=True):
        above = _folders_above(root, Path(folder))
        dirs[:] = [d for d in dirs if not d.startswith(".") and _folder_id(Path(folder, d)) not in above]
        for name in names:
            if name in OWN_FILES or not fnmatch.fnmatchcase(name, name_glob):
                continue
            path = Path(folder, name)
            found.append((relative_name(root, path), path))
    return [path for _, path in sorted(found, key=lambda item: item[0])]


def _folder_id(path: Path) -> tuple[int, int] | None:
    try:
        found = path.stat()
    except OSError:
        return None
    return (found.st_dev, found.st_ino)


def _folders_above(root: Path, folder: Path) -> set[tuple[int, int] | None]:
    """The identities of ``folder`` and every folder from ``root`` down to it (a link to one of
    them is a loop)."""
    ids = {_folder_id(root)}
    current = root
    for part in folder.relative_to(root).parts:
        current = current / part
        ids.add(_folder_id(current))
    ids.discard(None)
    return ids


def unlisted_reason(path: Path) -> IngestError | None:
    """Why a listed name cannot be read as a source file (:attr:`SourceFile.problem`), or None."""
    if path.name.startswith("."):
        return IngestError(HIDDEN_NAME, f"names starting with '.' are not read (editor, system and AppleDouble "
                                        f"files such as .DS_Store, ._{path.name.lstrip('.')}); rename the file "
                                        "to load it")
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return IngestError(BROKEN_LINK, "the link leads to itself (a loop of links)")
        if path.is_symlink():
            try:
                target = os.readlink(path)
            except OSError:
                target = "?"
            return IngestError(BROKEN_LINK, f"the link's target {target} does not exist (a moved file, an unmounted "
                                             "disk?): its graphs are not loaded, as for a deleted file")
        return IngestError(UNREADABLE, exc.strerror or str(exc))
    if not stat_mode.S_ISREG(mode):
        return IngestError(UNREADABLE, "not a regular file (a fifo, a socket or a device)")
    return None


def to_timestamps(values: pa.Array | list[str | None], position: str) -> pa.Array:
    """Parse smartcomment's "YYYY-MM-DD HH:MM:SS.sss" strings; a bad one rejects the file."""
    array = values if isinstance(values, pa.Array) else pa.array(values, type=pa.string())
    try:
        return pc.cast(array, schema.TIMESTAMP)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise IngestError(WRONG_FIELD_TYPE, f"created_at is not a timestamp: {exc}", position) from None


# Values of at least this many characters are not copied: Arrow reads them where the str keeps
# them. Below it the three small objects such a value costs outweigh copying it. It pays on the
# whole build: without it the large benchmark corpus's build peaks well higher, near or over the
# memory budget (BENCHMARKS.md, "Low-level devices still in the code"; bench/devices.py).
SHARED_VALUE_CHARS = 64 << 10


def large_string_array(items: list[Any], attribute: str, position: str) -> pa.Array | pa.ChunkedArray:
    """``getattr(item, attribute)`` of every item as a large_string column; the items let go of
    their strings (the attribute is set to None on every item).

    Long values are not copied: each becomes a one-value chunk over the str's own UTF-8 bytes, and
    the chunk keeps its str alive until the column is written. Runs of shorter values are
    converted by pyarrow at once. A long text is thus in memory once as str, never twice.
    """
    values = [getattr(item, attribute) for item in items]
    for item in items:
        setattr(item, attribute, None)
    chunks: list[pa.Array] = []
    run = 0  # where the current run of short values starts
    try:
        for i, value in enumerate(values):
            if value is not None and len(value) >= SHARED_VALUE_CHARS:
                if run < i:
                    chunks.append(pa.array(values[run:i], type=pa.large_string()))
                chunks.append(_shared_value(value))
                run = i + 1
        if run < len(values) or not chunks:
            chunks.append(pa.array(values[run:], type=pa.large_string()))
    except UnicodeEncodeError as exc:  # a lone surrogate from a JSON \ud800 escape
        raise IngestError(NOT_UTF8, f"{attribute} is not valid Unicode: {exc.reason}", position) from None
    return chunks[0] if len(chunks) == 1 else pa.chunked_array(chunks, type=pa.large_string())


def _shared_value(value: str) -> pa.Array:
    """A one-value large_string array over ``value``'s UTF-8 bytes; its buffer holds the str."""
    address, size = utf8_view(value)  # raises UnicodeEncodeError for a lone surrogate
    data = pa.foreign_buffer(address, size, base=value)
    offsets = pa.array([0, size], type=pa.int64()).buffers()[1]
    return pa.LargeStringArray.from_buffers(1, offsets, data)


def value_columns(values: pa.Array | pa.ChunkedArray) -> dict[str, Any]:
    """The nodes' value_bytes and value_short columns of their values (value_short copies only the
    values of at most schema.SHORT_VALUE_BYTES bytes)."""
    sizes = pc.binary_length(values).cast(pa.int64())
    short = pc.if_else(pc.less_equal(sizes, schema.SHORT_VALUE_BYTES), values, pa.scalar(None, values.type))
    return {"value_bytes": sizes, "value_short": short.cast(pa.string())}


def table(table_schema: pa.Schema, columns: dict[str, Any]) -> pa.Table:
    """Build a table in the canonical schema; a column the reader does not give is all null."""
    n = None
    for value in columns.values():
        n = len(value)
        break
    arrays = []
    for fld in table_schema:
        value = columns.get(fld.name)
        if value is None:
            arrays.append(pa.nulls(n or 0, type=fld.type))
        elif isinstance(value, pa.Array | pa.ChunkedArray):
            arrays.append(value if value.type == fld.type else value.cast(fld.type))
        else:
            arrays.append(pa.array(value, type=fld.type))
    return pa.Table.from_arrays(arrays, schema=table_schema)


def graph_row(
    *,
    graph_id: str,
    file: SourceFile,
    sha256: str,
    system: str,
    dataset: str,
    user_id: str | None,
    project_id: str | None,
    created_at: pa.Array,
    counts: dict[str, int],
    metadata: str | None,
) -> pa.Table:
    """The single `graphs` row of one graph."""
    return table(
        schema.GRAPHS,
        {
            "graph_id": [graph_id],
            "source": [file.source],
            "system": [system],
            "dataset": [dataset],
            "split": [file.split],
            "file": [file.relpath],
            "file_sha256": [sha256],
            "user_id": [user_id],
            "project_id": [project_id],
            "created_at": created_at,
            **{schema.COUNT_COLUMNS[name]: [n] for name, n in counts.items()},
            "metadata": [metadata],
        },
    )


def read_bytes(path: Path) -> bytes:
    """Read a whole file; an unreadable one is an ingest error, not a crash."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise IngestError(UNREADABLE, f"{exc.strerror or exc}") from None


def read_while_hashing(path: Path) -> tuple[bytes, OnThread[str]]:
    """Read a whole file and start its sha256 on a daemon thread (pipelines.on_thread); return once
    hashing runs.

    hashlib releases the GIL, so the hash overlaps the caller's decode, but only if the thread got
    going first: a msgspec decode holds the GIL throughout. Wait for the hash before building
    tables: until it is done the file's bytes stay alive, one more copy of the file at the peak."""
    data = read_bytes(path)
    return data, OnThread(file_sha256, data, name="sha256", daemon=True)


def source_root(file: SourceFile) -> Path:
    """The source folder ``file`` was listed under (its path less its relative path)."""
    path = file.path
    for _ in file.relpath.split("/"):
        path = path.parent
    return path


def size_and_mtime(path: Path) -> tuple[int, int]:
    """A file's size and modification time, (-1, -1) when it is gone: what a reader's per-folder index
    is keyed on, so a file changed since the index was built is read again."""
    try:
        found = path.stat()
    except OSError:
        return (-1, -1)
    return (found.st_size, found.st_mtime_ns)


def split_of(root: Path, path: Path, default: str) -> str:
    """The first folder under ``root`` that holds ``path``, or ``default`` for top-level files."""
    first, sep, _ = relative_name(root, path).partition("/")
    return first if sep else default


def require_keys(record: dict[str, Any], keys: tuple[str, ...], position: str) -> None:
    """Raise MISSING_KEY naming the first of ``keys`` that ``record`` lacks."""
    for key in keys:
        if key not in record:
            raise IngestError(MISSING_KEY, f"missing required key {key!r}", position)


def load_json(data: bytes) -> Any:
    """Parse a small JSON document (one record), naming what is wrong with it when it fails."""
    if not data.strip():
        raise IngestError(EMPTY_FILE, "the file is empty")
    if data.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte-order mark is valid UTF-8 (as in the smartcomment reader)
        data = data[3:]
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if "UTF-8" in exc.msg or "utf-8" in exc.msg:
            raise IngestError(NOT_UTF8, "the file is not valid UTF-8", first_bad_utf8(data)) from None
        raise IngestError(INVALID_JSON, exc.msg, f"line {exc.lineno} column {exc.colno}") from None


def first_bad_utf8(data: bytes) -> str | None:
    """Where the first invalid UTF-8 byte is (orjson and msgspec do not say), e.g. ``byte 1234``."""
    try:
        bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"byte {exc.start}"
    return None
