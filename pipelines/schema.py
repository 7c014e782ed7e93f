"""The canonical tables of the warehouse: one pyarrow schema per table, defined here only, with their
keys and references (declared in sql/views/_views.yml; the key and relationship checks are generated
from them).

Every reader yields rows in these schemas, the writer writes them, the checks and the tests
read them from here. Changing a column means changing it here and nowhere else. The facts the SQL
shares with Python (error taxonomy, systems, datasets) are read from the seeds in sql/seeds.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

TIMESTAMP = pa.timestamp("ms")
# Span start and end times (OpenTelemetry's are nanoseconds; microseconds is what Iceberg v2 and every
# DuckDB read exactly).
TIMESTAMP_US = pa.timestamp("us")

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
        ("files", pa.list_(pa.string())),  # every input file of a graph read from several (an OTLP trace)
        ("graph_key", pa.int64(), False),  # a 64-bit digest of graph_id (readers.base.graph_key), unique
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
        ("value_short", pa.string()),  # value when at most SHORT_VALUE_BYTES: what the marts compare
        ("comment", pa.string()),
        ("created_at", TIMESTAMP),
        ("metadata", pa.string()),
        # integer keys the marts join on instead of (graph_id, full_node_id) (readers.base.with_keys)
        ("graph_key", pa.int64(), False),
        ("node_index", pa.int64(), False),  # the node's position in its graph's nodes, from 0
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
        ("graph_key", pa.int64(), False),
        ("source_node_index", pa.int64()),  # node_index of the source node
        ("target_node_index", pa.int64()),  # node_index of the target node
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
        # Spans (the OpenTelemetry sources); null for the other sources.
        ("parent_op_id", pa.string()),
        ("span_kind", pa.string()),
        ("start_time", TIMESTAMP_US),
        ("end_time", TIMESTAMP_US),
        ("status", pa.string()),
        ("status_message", pa.string()),
        ("model", pa.string()),
        ("input_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
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
        ("taxonomy", pa.string()),  # the label set error_type belongs to (sql/seeds/taxonomy_crosswalk.csv)
        ("faulty_op_id", pa.string()),
        ("responsible_agent", pa.string()),
        ("decisive_step", pa.int64()),
        ("is_root_cause", pa.bool_()),
        ("reason", pa.large_string()),
        ("source_evidence_ids", pa.list_(pa.string())),
        ("provenance", pa.string()),
        ("annotator_kind", pa.string()),  # who labelled: one of ANNOTATOR_KINDS, null when unknown
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

# What attribution methods predicted (the prediction sources: docs/ATTRIBUTION.md): one row per
# prediction, matched to the annotation it is about.
ATTRIBUTIONS = pa.schema(
    [
        ("method", pa.string(), False),
        ("annotation_id", pa.string(), False),
        ("graph_id", pa.string(), False),
        ("system", pa.string(), False),
        ("dataset", pa.string(), False),
        ("predicted_error_type", pa.string()),
        ("predicted_op_id", pa.string()),
        ("predicted_agent", pa.string()),
        ("predicted_step", pa.int64()),
        ("reason", pa.large_string()),
        ("source_file", pa.string(), False),
    ]
)

# The graphs a method's run covered (its cases are their annotations, predicted or not).
ATTRIBUTION_SCOPE = pa.schema(
    [
        ("method", pa.string(), False),
        ("graph_id", pa.string(), False),
        ("source_file", pa.string(), False),
    ]
)

# The tables of the execution graphs, in the order they are written.
GRAPH_TABLES: dict[str, pa.Schema] = {
    "graphs": GRAPHS,
    "sessions": SESSIONS,
    "nodes": NODES,
    "edges": EDGES,
    "operations": OPERATIONS,
    "annotations": ANNOTATIONS,
}
# The tables of the prediction sources.
ATTRIBUTION_TABLES: dict[str, pa.Schema] = {"attributions": ATTRIBUTIONS, "attribution_scope": ATTRIBUTION_SCOPE}
# Every table a partition's generation holds (each one, empty where its source kind writes nothing);
# ingest_errors rides along with them.
PARTITION_TABLES: dict[str, pa.Schema] = {**GRAPH_TABLES, **ATTRIBUTION_TABLES}
TABLES: dict[str, pa.Schema] = {**PARTITION_TABLES, "ingest_errors": INGEST_ERRORS}

# nodes.value_short holds a value of at most this many UTF-8 bytes (NULL for longer ones), so that
# queries reading short facts (judge scores, predictions) never scan the long values.
SHORT_VALUE_BYTES = 256

# Per-graph row counts carried in `graphs`, keyed by the table they count.
COUNT_COLUMNS: dict[str, str] = {
    "nodes": "n_nodes",
    "edges": "n_edges",
    "operations": "n_operations",
    "sessions": "n_sessions",
    "annotations": "n_annotations",
}

# smartcomment's sentinel session (its COMMENT:NONE@1 node): referenced without being listed (the
# relationships to sessions in sql/views/_views.yml name it as `unlisted`; tests/test_table_docs.py).
NONE_SESSION = "__none__"

# The tables' declarations (their keys, relationships and column descriptions): sql/views/_views.yml.
VIEWS_DECLARATION = Path(__file__).resolve().parent.parent / "sql" / "views" / "_views.yml"


@dataclass(frozen=True)
class Relationship:
    """Rows of ``table`` refer to rows of ``to`` (dbt's relationships test, generated as the check
    ``<table>:<name>``). A row whose referring columns hold NULL refers to nothing; so does one whose
    last referring column holds a value of ``unlisted``."""

    name: str
    table: str
    columns: tuple[str, ...]
    to: str
    to_columns: tuple[str, ...]
    unlisted: tuple[str, ...] = ()


def _declared_keys() -> tuple[dict[str, tuple[str, ...]], tuple[Relationship, ...]]:
    """The tables' primary keys and relationships as sql/views/_views.yml declares them, each column
    checked against the table's schema (an error names the file and the table)."""
    import yaml

    try:
        doc = yaml.load(VIEWS_DECLARATION.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506
        entries = {e["name"]: e for e in doc["views"] if e["name"] in TABLES}
    except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
        raise ValueError(f"{VIEWS_DECLARATION}: the tables' declarations cannot be read: {exc}") from None

    def columns_of(table: str, names: object, what: str) -> tuple[str, ...]:
        if not isinstance(names, list) or not names or not set(names) <= set(TABLES[table].names):
            raise ValueError(f"{VIEWS_DECLARATION}: {table}: {what} must list columns of {table}, got {names!r}")
        return tuple(names)

    keys = {name: columns_of(name, e["primary_key"], "primary_key") for name, e in entries.items()
            if "primary_key" in e}
    relationships = []
    for name, entry in entries.items():
        for rel in entry.get("relationships") or []:
            if rel.get("to") not in keys or set(rel) - {"name", "columns", "to", "to_columns", "unlisted"}:
                raise ValueError(f"{VIEWS_DECLARATION}: {name}: relationship {rel.get('name')} needs name, columns, "
                                 f"to (a table with a primary_key), to_columns and may have unlisted: {rel!r}")
            relationships.append(Relationship(
                rel["name"], name, columns_of(name, rel.get("columns"), rel["name"]), rel["to"],
                columns_of(rel["to"], rel.get("to_columns"), rel["name"]), tuple(rel.get("unlisted") or ())))
    return keys, tuple(relationships)


# Keys that identify one row (within its graph, for the graph tables), and the references between the
# tables: declared in sql/views/_views.yml (the key and relationship checks are generated from them).
PRIMARY_KEYS, RELATIONSHIPS = _declared_keys()


# -- facts the SQL shares: read from the seeds (sql/seeds), the one place they are written -----------

SEEDS = Path(__file__).resolve().parent.parent / "sql" / "seeds"


def seed_rows(name: str) -> list[dict[str, str]]:
    """The rows of sql/seeds/<name>.csv (loaded as a table of the same name by every connection)."""
    with (SEEDS / f"{name}.csv").open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


_ERROR_TYPES = seed_rows("error_types")
_SYSTEMS = seed_rows("systems")
_DATASETS = seed_rows("datasets")

ERROR_TYPES = tuple(r["error_type"] for r in _ERROR_TYPES)
MEMORY_ERROR_TYPES = tuple(r["error_type"] for r in _ERROR_TYPES if r["error_class"] == "memory")
NON_MEMORY_ERROR_TYPES = tuple(r["error_type"] for r in _ERROR_TYPES if r["error_class"] == "non_memory")
CONSTRUCTION_ERROR_TYPES = tuple(r["error_type"] for r in _ERROR_TYPES if r["stage"] == "construction")

KNOWN_SYSTEMS = tuple(r["system"] for r in _SYSTEMS)
MEMTRACEBENCH_SPLITS = tuple(r["system"] for r in _SYSTEMS if r["benchmark"] == "memtracebench")
MULTI_AGENT_SYSTEMS = tuple(r["system"] for r in _SYSTEMS if r["graph_kind"] == "multi_agent")
KNOWN_DATASETS = tuple(r["dataset"] for r in _DATASETS)
MEMORY_DATASETS = tuple(r["dataset"] for r in _DATASETS if r["benchmark"] == "memtracebench")
TASK_BENCHMARKS = tuple(r["dataset"] for r in _DATASETS if r["benchmark"] == "whowhen")
TRACERTRAJ_DOMAINS = tuple(r["dataset"] for r in _DATASETS if r["benchmark"] == "tracertraj")
UNKNOWN = "unknown"
# operations.status of a span (OpenTelemetry's StatusCode; pipelines.readers.otel maps onto these).
SPAN_STATUSES = ("ok", "error", "unset")

# annotations.annotator_kind: who put the label on (a person, an LLM judge, code, a benchmark's
# published labels); the platform readers map their own annotator/source types onto these.
ANNOTATOR_KINDS = ("human", "llm", "code", "benchmark")
BENCHMARK_ANNOTATOR = "benchmark"

# The failure taxonomies' labels and the common categories they map onto (the crosswalk seed).
_CROSSWALK = seed_rows("taxonomy_crosswalk")
FAILURE_CATEGORIES = tuple(r["common_category"] for r in seed_rows("failure_categories"))
TAXONOMIES = tuple(dict.fromkeys(r["taxonomy"] for r in _CROSSWALK))
TAXONOMY_LABELS = tuple(dict.fromkeys(r["label"] for r in _CROSSWALK))  # every label of every taxonomy
UNMAPPED = "unmapped"  # failure_modes_common's category of a label the crosswalk lacks

_INGEST_ERROR_KINDS = seed_rows("ingest_error_kinds")
INGEST_ERROR_KINDS = tuple(r["kind"] for r in _INGEST_ERROR_KINDS)
# The kinds a reader names on purpose; the rest (reader_failure) mean a reader bug.
EXPECTED_INGEST_ERROR_KINDS = tuple(r["kind"] for r in _INGEST_ERROR_KINDS if r["reader_bug"] == "no")


def ingest_error_kind(name: str) -> str:
    """``name`` if sql/seeds/ingest_error_kinds.csv lists it: the one way code names a kind of
    ingest error, so a kind the seed (and so the docs and the GX suite) does not know cannot be written."""
    if name not in INGEST_ERROR_KINDS:
        raise ValueError(f"sql/seeds/ingest_error_kinds.csv: unknown ingest error kind {name!r}; "
                         f"known: {', '.join(INGEST_ERROR_KINDS)}")
    return name
