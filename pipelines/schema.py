"""The canonical tables of the warehouse: one pyarrow schema per table, defined here only.

Every reader yields rows in these schemas, the writer writes them, the checks and the tests
read them from here. Changing a column means changing it here and nowhere else.
"""

from __future__ import annotations

import pyarrow as pa

TIMESTAMP = pa.timestamp("ms")

GRAPHS = pa.schema(
    [
        ("graph_id", pa.string(), False),
        ("source", pa.string(), False),
        ("system", pa.string(), False),
        ("dataset", pa.string(), False),
        ("split", pa.string(), False),
        ("file", pa.string(), False),
        ("file_sha256", pa.string(), False),
        ("user_id", pa.string()),
        ("project_id", pa.string()),
        ("created_at", TIMESTAMP),
        ("n_nodes", pa.int64(), False),
        ("n_edges", pa.int64(), False),
        ("n_operations", pa.int64(), False),
        ("n_sessions", pa.int64(), False),
        ("n_annotations", pa.int64(), False),
        ("metadata", pa.string()),
    ]
)

SESSIONS = pa.schema(
    [
        ("graph_id", pa.string(), False),
        ("session_id", pa.string(), False),
        ("session_name", pa.string()),
        ("category", pa.string()),
        ("comment", pa.string()),
        ("created_at", TIMESTAMP),
        ("ordinal", pa.int64(), False),
        ("metadata", pa.string()),
    ]
)

NODES = pa.schema(
    [
        ("graph_id", pa.string(), False),
        ("full_node_id", pa.string(), False),
        ("name", pa.string()),
        ("class_name", pa.string()),
        ("version", pa.int64()),
        ("category", pa.string()),
        ("session_id", pa.string()),
        ("value", pa.large_string()),
        ("value_bytes", pa.int64()),
        ("comment", pa.string()),
        ("created_at", TIMESTAMP),
        ("metadata", pa.string()),
    ]
)

EDGES = pa.schema(
    [
        ("graph_id", pa.string(), False),
        ("edge_id", pa.string(), False),
        ("op_id", pa.string()),
        ("source_full_node_id", pa.string()),
        ("target_full_node_id", pa.string()),
        ("category", pa.string()),
        ("session_id", pa.string()),
        ("created_at", TIMESTAMP),
    ]
)

OPERATIONS = pa.schema(
    [
        ("graph_id", pa.string(), False),
        ("op_id", pa.string(), False),
        ("op_name", pa.string()),
        ("category", pa.string()),
        ("session_id", pa.string()),
        ("actor", pa.string()),
        ("step", pa.int64(), False),
        ("comment", pa.string()),
        ("created_at", TIMESTAMP),
        ("metadata", pa.string()),
    ]
)

ANNOTATIONS = pa.schema(
    [
        ("graph_id", pa.string(), False),
        ("annotation_id", pa.string(), False),
        ("system", pa.string(), False),
        ("dataset", pa.string(), False),
        ("query_id", pa.string()),
        ("query", pa.large_string()),
        ("golden_answers", pa.list_(pa.string())),
        ("prediction", pa.large_string()),
        ("error_type", pa.string()),
        ("faulty_op_id", pa.string()),
        ("responsible_agent", pa.string()),
        ("decisive_step", pa.int64()),
        ("reason", pa.large_string()),
        ("source_evidence_ids", pa.list_(pa.string())),
        ("provenance", pa.string()),
        ("extra", pa.string()),
    ]
)

INGEST_ERRORS = pa.schema(
    [
        ("source", pa.string(), False),
        ("split", pa.string(), False),
        ("file", pa.string(), False),
        ("kind", pa.string(), False),
        ("reason", pa.string(), False),
        ("position", pa.string()),
        ("rejected", pa.bool_(), False),
    ]
)

# The flattened tables in the order they are written; ingest_errors rides along with them.
GRAPH_TABLES: dict[str, pa.Schema] = {
    "graphs": GRAPHS,
    "sessions": SESSIONS,
    "nodes": NODES,
    "edges": EDGES,
    "operations": OPERATIONS,
    "annotations": ANNOTATIONS,
}
TABLES: dict[str, pa.Schema] = {**GRAPH_TABLES, "ingest_errors": INGEST_ERRORS}

# Per-graph row counts carried in `graphs`, keyed by the table they count.
COUNT_COLUMNS: dict[str, str] = {
    "nodes": "n_nodes",
    "edges": "n_edges",
    "operations": "n_operations",
    "sessions": "n_sessions",
    "annotations": "n_annotations",
}

# Keys that identify one row within its graph.
PRIMARY_KEYS: dict[str, tuple[str, ...]] = {
    "graphs": ("graph_id",),
    "sessions": ("graph_id", "session_id"),
    "nodes": ("graph_id", "full_node_id"),
    "edges": ("graph_id", "edge_id"),
    "operations": ("graph_id", "op_id"),
    "annotations": ("graph_id", "annotation_id"),
}

MEMORY_ERROR_TYPES = ("ExtractionError", "UpdateError", "DeletionError", "RetrievalError", "ResponseError")
NON_MEMORY_ERROR_TYPES = ("AnnotationError", "LLMAsAJudgeError")
ERROR_TYPES = MEMORY_ERROR_TYPES + NON_MEMORY_ERROR_TYPES

MEMTRACEBENCH_SPLITS = ("rag", "mem0", "evermemos", "long_context")
MULTI_AGENT_SYSTEMS = ("captainagent", "magentic-one", "metagpt")
KNOWN_SYSTEMS = MEMTRACEBENCH_SPLITS + MULTI_AGENT_SYSTEMS
MEMORY_DATASETS = ("locomo", "longmemeval", "realmem")
UNKNOWN = "unknown"
