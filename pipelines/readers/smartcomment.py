"""Reader for graphs exported by smartcomment (``ExecNetwork.export_graph()`` as JSON).

Decoding goes straight from bytes into typed msgspec structs: only the fields the warehouse keeps
are materialised, free-form ``metadata`` stays raw JSON text (never parsed), and there is no
object-size limit. A file costs its bytes plus its decoded values plus the Arrow columns, so
peak memory stays a small multiple of the largest file.

This module reads any folder of such files (``smartcomment`` source: system = project_id,
annotations optional). The ``memtracebench`` reader reuses :func:`read_graph_file` with the
split folder as the system.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import orjson
import pyarrow as pa

from pipelines import schema
from pipelines.readers.base import (
    DANGLING_REFERENCE,
    DUPLICATE_KEY,
    EMPTY_FILE,
    INVALID_JSON,
    MISSING_KEY,
    NOT_UTF8,
    WRONG_FIELD_TYPE,
    WRONG_TOP_LEVEL_TYPE,
    GraphRows,
    IngestError,
    SourceFile,
    first_bad_utf8,
    graph_row,
    large_string_array,
    list_files,
    read_while_hashing,
    split_of,
    table,
    to_timestamps,
    value_columns,
)
from pipelines.storage.warehouse import relative_name

kind = "smartcomment"

_NO_JSON = msgspec.Raw(b"")


class _Node(msgspec.Struct):
    full_node_id: str
    name: str | None = None
    class_name: str | None = None
    version: int | None = None
    category: str | None = None
    session_id: str | None = None
    value: str | None = None
    comment: str | None = None
    created_at: str | None = None
    metadata: msgspec.Raw = _NO_JSON


class _Edge(msgspec.Struct):
    edge_id: str
    source_full_node_id: str
    target_full_node_id: str
    op_id: str | None = None
    category: str | None = None
    session_id: str | None = None
    created_at: str | None = None


class _Operation(msgspec.Struct):
    op_id: str
    op_name: str | None = None
    category: str | None = None
    session_id: str | None = None
    comment: str | None = None
    created_at: str | None = None
    metadata: msgspec.Raw = _NO_JSON


class _Session(msgspec.Struct):
    session_id: str
    session_name: str | None = None
    category: str | None = None
    comment: str | None = None
    created_at: str | None = None
    metadata: msgspec.Raw = _NO_JSON


class _Data(msgspec.Struct):
    nodes: list[_Node]
    edges: list[_Edge]
    operations: list[_Operation]
    sessions: list[_Session]
    annotations: list[dict[str, Any]] = []


class _Graph(msgspec.Struct):
    graph_id: str
    data: _Data
    user_id: str | None = None
    project_id: str | None = None
    created_at: str | None = None
    metadata: msgspec.Raw = _NO_JSON


_DECODER = msgspec.json.Decoder(_Graph)


_AT = re.compile(r" - at `(?P<path>[^`]+)`$")
_BYTE = re.compile(r"\(byte (?P<byte>\d+)\)$")
_MISSING = re.compile(r"Object missing required field `(?P<field>[^`]+)`")


def decode_graph(data: bytes) -> _Graph:
    """Decode one exported graph, turning every parse or shape error into an IngestError."""
    if not data.strip():
        raise IngestError(EMPTY_FILE, "the file is empty")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return _DECODER.decode(data)
    except msgspec.ValidationError as exc:
        message = str(exc)
        at = _AT.search(message)
        position = at.group("path") if at else "$"
        reason = _AT.sub("", message)
        missing = _MISSING.search(reason)
        if missing:
            return_kind = MISSING_KEY
            reason = f"missing required key {missing.group('field')!r}"
        elif position == "$" and reason.startswith("Expected `object`"):
            return_kind = WRONG_TOP_LEVEL_TYPE
        else:
            return_kind = WRONG_FIELD_TYPE
        raise IngestError(return_kind, reason, position) from None
    except msgspec.DecodeError as exc:
        message = str(exc)
        if "UTF-8" in message or "utf-8" in message:
            raise IngestError(NOT_UTF8, message, first_bad_utf8(data)) from None
        at = _BYTE.search(message)
        if "truncated" in message:
            raise IngestError(INVALID_JSON, "the JSON is truncated", f"byte {len(data)}") from None
        raise IngestError(
            INVALID_JSON, _BYTE.sub("", message).strip(), f"byte {at.group('byte')}" if at else None
        ) from None


def raw_text(raw: msgspec.Raw, position: Callable[[], str]) -> str | None:
    """Free-form JSON kept as text, exactly as written; invalid UTF-8 rejects the file."""
    if not len(raw):
        return None
    try:
        return str(raw, "utf-8")
    except UnicodeDecodeError as exc:
        raise IngestError(NOT_UTF8, f"metadata is not UTF-8: {exc.reason}", position()) from None


def _texts(items: list[Any], path: str) -> list[str | None]:
    """Every item's metadata as text (raw_text), in one pass; only a failure walks them again, to
    name the item."""
    try:
        return [str(raw, "utf-8") if (raw := item.metadata) else None for item in items]
    except UnicodeDecodeError:
        for i, item in enumerate(items):
            raw_text(item.metadata, lambda i=i: f"$.data.{path}[{i}].metadata")
        raise


def graph_tables(
    graph: _Graph,
    *,
    file: SourceFile,
    sha256: str,
    system: str,
    dataset: str,
    annotations: pa.Table,
) -> dict[str, pa.Table]:
    """Flatten a decoded graph into the canonical tables; check its references on the way.

    Memory: the raw metadata is turned into text first, so the file's bytes can be freed; a long
    ``value`` is not copied, its Arrow column holds the decoded str itself.
    """
    gid = graph.graph_id
    data = graph.data
    nodes, edges, ops, sessions = data.nodes, data.edges, data.operations, data.sessions

    node_ids = [n.full_node_id for n in nodes]
    op_ids = [o.op_id for o in ops]
    session_ids = [s.session_id for s in sessions]
    _check_unique(node_ids, "node full_node_id", "$.data.nodes")
    _check_unique(op_ids, "op_id", "$.data.operations")
    _check_unique(session_ids, "session_id", "$.data.sessions")
    _check_unique([e.edge_id for e in edges], "edge_id", "$.data.edges")
    _check_references(graph, set(node_ids), set(op_ids), set(session_ids))

    def ids(n: int) -> pa.Array:
        return pa.array([gid] * n, type=pa.string())

    metadata = {path: _texts(items, path) for path, items in (("sessions", sessions), ("nodes", nodes),
                                                              ("operations", ops))}
    graph_metadata = raw_text(graph.metadata, lambda: "$.metadata")
    for item in (*sessions, *nodes, *ops, graph):
        item.metadata = _NO_JSON  # the last references into the file's bytes
    values = large_string_array(nodes, "value", "$.data.nodes")
    tables = {
        "sessions": table(
            schema.SESSIONS,
            {
                "graph_id": ids(len(sessions)),
                "session_id": session_ids,
                "session_name": [s.session_name for s in sessions],
                "category": [s.category for s in sessions],
                "comment": [s.comment for s in sessions],
                "created_at": to_timestamps([s.created_at for s in sessions], "$.data.sessions"),
                "ordinal": pa.array(range(len(sessions)), type=pa.int64()),
                "metadata": metadata["sessions"],
            },
        ),
        "nodes": table(
            schema.NODES,
            {
                "graph_id": ids(len(nodes)),
                "full_node_id": node_ids,
                "name": [n.name for n in nodes],
                "class_name": [n.class_name for n in nodes],
                "version": [n.version for n in nodes],
                "category": [n.category for n in nodes],
                "session_id": [n.session_id for n in nodes],
                "value": values,
                **value_columns(values),
                "comment": [n.comment for n in nodes],
                "created_at": to_timestamps([n.created_at for n in nodes], "$.data.nodes"),
                "metadata": metadata["nodes"],
            },
        ),
        "edges": table(
            schema.EDGES,
            {
                "graph_id": ids(len(edges)),
                "edge_id": [e.edge_id for e in edges],
                "op_id": [e.op_id for e in edges],
                "source_full_node_id": [e.source_full_node_id for e in edges],
                "target_full_node_id": [e.target_full_node_id for e in edges],
                "category": [e.category for e in edges],
                "session_id": [e.session_id for e in edges],
                "created_at": to_timestamps([e.created_at for e in edges], "$.data.edges"),
            },
        ),
        "operations": table(
            schema.OPERATIONS,
            {
                "graph_id": ids(len(ops)),
                "op_id": op_ids,
                "op_name": [o.op_name for o in ops],
                "category": [o.category for o in ops],
                "session_id": [o.session_id for o in ops],
                "actor": None,
                "step": pa.array(range(len(ops)), type=pa.int64()),
                "comment": [o.comment for o in ops],
                "created_at": to_timestamps([o.created_at for o in ops], "$.data.operations"),
                "metadata": metadata["operations"],
            },
        ),
        "annotations": annotations,
    }
    counts = {name: tables[name].num_rows for name in schema.COUNT_COLUMNS}
    tables["graphs"] = graph_row(
        graph_id=gid,
        file=file,
        sha256=sha256,
        system=system,
        dataset=dataset,
        user_id=graph.user_id,
        project_id=graph.project_id,
        created_at=to_timestamps([graph.created_at], "$.created_at"),
        counts=counts,
        metadata=graph_metadata,
    )
    return {name: tables[name] for name in schema.GRAPH_TABLES}


def _check_unique(values: list[str], what: str, position: str) -> None:
    if len(set(values)) != len(values):
        seen: set[str] = set()
        for i, value in enumerate(values):
            if value in seen:
                raise IngestError(DUPLICATE_KEY, f"{what} {value!r} appears twice", f"{position}[{i}]")
            seen.add(value)


# The sentinel session smartcomment injects when an op has no inputs or outputs: it need not be listed.
NONE_SESSION = schema.NONE_SESSION


def _check_references(graph: _Graph, node_ids: set[str], op_ids: set[str], session_ids: set[str]) -> None:
    """A graph whose edges point nowhere is not a graph: reject it, naming the first dangling id."""
    session_ids = session_ids | {NONE_SESSION}
    for i, edge in enumerate(graph.data.edges):
        for end in (edge.source_full_node_id, edge.target_full_node_id):
            if end not in node_ids:
                raise IngestError(
                    DANGLING_REFERENCE, f"edge {edge.edge_id} points at unknown node {end!r}",
                    f"$.data.edges[{i}]",
                )
        if edge.op_id is not None and edge.op_id not in op_ids:
            raise IngestError(
                DANGLING_REFERENCE, f"edge {edge.edge_id} names unknown op {edge.op_id!r}", f"$.data.edges[{i}]"
            )
    for path, items in (("nodes", graph.data.nodes), ("operations", graph.data.operations),
                        ("edges", graph.data.edges)):
        for i, item in enumerate(items):
            if item.session_id is not None and item.session_id not in session_ids:
                raise IngestError(
                    DANGLING_REFERENCE, f"{path[:-1]} names unknown session {item.session_id!r}",
                    f"$.data.{path}[{i}]",
                )


# ---------------------------------------------------------------------------------------------
# Annotations (MemTraceBench's `data.annotations`)

MEMTRACEBENCH_TAXONOMY = "memtracebench"  # the taxonomy of final_error_type (sql/seeds/taxonomy_crosswalk.csv)

_MAPPED = {
    "query_id", "query", "golden_answers", "prediction", "final_error_type", "final_op_id",
    "source_evidence_ids", "reason",
}


def _as_text_list(value: Any, what: str, position: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return [str(v) for v in value]
    raise IngestError(WRONG_FIELD_TYPE, f"{what} must be a string or a list of strings", position)


def _as_text(value: Any, what: str, position: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float | bool):
        return str(value)
    raise IngestError(WRONG_FIELD_TYPE, f"{what} must be a string", position)


def annotation_table(
    graph: _Graph, *, system: str, dataset: str, provenance: str, annotator_kind: str | None,
    node_ids: set[str], op_ids: set[str]
) -> pa.Table:
    """One row per annotation; unmapped keys are kept as JSON text in ``extra``."""
    rows: dict[str, list[Any]] = {f.name: [] for f in schema.ANNOTATIONS}
    for i, ann in enumerate(graph.data.annotations):
        pos = f"$.data.annotations[{i}]"
        op = _as_text(ann.get("final_op_id"), "final_op_id", pos)
        op = None if op in (None, "", "null", "None") else op
        if op is not None and op not in op_ids:
            raise IngestError(DANGLING_REFERENCE, f"annotation final_op_id {op!r} is not an op of the graph", pos)
        query_id = _as_text(ann.get("query_id"), "query_id", pos)
        if query_id is not None and query_id not in node_ids:
            raise IngestError(DANGLING_REFERENCE, f"annotation query_id {query_id!r} is not a node of the graph", pos)
        error_type = _as_text(ann.get("final_error_type"), "final_error_type", pos)
        extra = {k: v for k, v in ann.items() if k not in _MAPPED}
        rows["graph_id"].append(graph.graph_id)
        rows["annotation_id"].append(f"{graph.graph_id}#a{i}")
        rows["system"].append(system)
        rows["dataset"].append(dataset)
        rows["query_id"].append(query_id)
        rows["query"].append(_as_text(ann.get("query"), "query", pos))
        rows["golden_answers"].append(_as_text_list(ann.get("golden_answers"), "golden_answers", pos))
        rows["prediction"].append(_as_text(ann.get("prediction"), "prediction", pos))
        rows["error_type"].append(error_type or None)
        # final_error_type is MemTraceBench's label set; its annotation names the one decisive error
        rows["taxonomy"].append(MEMTRACEBENCH_TAXONOMY if error_type else None)
        rows["faulty_op_id"].append(op)
        rows["responsible_agent"].append(None)
        rows["decisive_step"].append(None)
        rows["is_root_cause"].append(True)
        rows["reason"].append(_as_text(ann.get("reason"), "reason", pos))
        rows["source_evidence_ids"].append(
            _as_text_list(ann.get("source_evidence_ids"), "source_evidence_ids", pos)
        )
        rows["provenance"].append(provenance)
        rows["annotator_kind"].append(annotator_kind)
        rows["extra"].append(orjson.dumps(extra, option=orjson.OPT_SORT_KEYS).decode() if extra else None)
    return table(schema.ANNOTATIONS, rows)


# ---------------------------------------------------------------------------------------------
# Dataset inference

_DATASET_ALIASES = {
    "locomo": "locomo",
    "longmemeval": "longmemeval",
    "realmem": "realmem",
}


def infer_dataset(*hints: str | None) -> str:
    """The source dataset from metadata, file name or user id (first that names a known one)."""
    for hint in hints:
        if not hint:
            continue
        token = re.split(r"[_\-/.\s]", hint.strip().lower(), maxsplit=1)[0]
        if token in _DATASET_ALIASES:
            return _DATASET_ALIASES[token]
        compact = re.sub(r"[^a-z]", "", hint.lower())
        if compact in _DATASET_ALIASES:
            return _DATASET_ALIASES[compact]
    return schema.UNKNOWN


def _metadata_hint(graph: _Graph, key: str) -> str | None:
    if not len(graph.metadata):
        return None
    try:
        meta = orjson.loads(bytes(graph.metadata))
    except orjson.JSONDecodeError:
        return None
    value = meta.get(key) if isinstance(meta, dict) else None
    return value if isinstance(value, str) else None


# ---------------------------------------------------------------------------------------------
# The reader


def read_graph_file(
    file: SourceFile,
    *,
    system_of: Callable[[Any], str],
    provenance: str,
    annotator_kind: str | None,
) -> Iterator[GraphRows | IngestError]:
    """Read one exported graph file; ``system_of(graph)`` names its system, ``annotator_kind`` who
    labelled its annotations (``annotations.annotator_kind``)."""
    data, hashing = read_while_hashing(file.path)
    try:
        graph = decode_graph(data)
    finally:
        del data
    dataset = infer_dataset(
        _metadata_hint(graph, "memtracebench_dataset_source"), file.path.name, graph.user_id
    )
    system = system_of(graph)
    node_ids = {n.full_node_id for n in graph.data.nodes}
    op_ids = {o.op_id for o in graph.data.operations}
    annotations = annotation_table(
        graph, system=system, dataset=dataset, provenance=provenance, annotator_kind=annotator_kind,
        node_ids=node_ids, op_ids=op_ids
    )
    yield GraphRows(
        graph_tables(graph, file=file, sha256=hashing.result(), system=system, dataset=dataset,
                     annotations=annotations)
    )


def discover(root: Path, source: str) -> list[SourceFile]:
    """Every ``*.json`` under ``root``; the split is the first folder level (``root`` for top files)."""
    root = root.absolute()  # file paths keep their own names (a Hub cache links them to blobs)
    if root.is_file():
        return [SourceFile(source, "root", root, root.name)]
    return [
        SourceFile(source, split_of(root, path, "root"), path, relative_name(root, path))
        for path in list_files(root, "**/*.json")
    ]


def read(file: SourceFile) -> Iterator[GraphRows | IngestError]:
    return read_graph_file(
        # a smartcomment export says nothing of who wrote its annotations
        file, system_of=lambda g: g.project_id or schema.UNKNOWN, provenance="smartcomment", annotator_kind=None
    )

