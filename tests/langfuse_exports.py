"""Langfuse blob-storage exports written to its field reference ("Blob storage export field reference";
the field groups of "Export to blob storage"), for the tests of the langfuse source kind: no Langfuse
server can run here (it needs ClickHouse, Redis and PostgreSQL)."""

from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

# The enriched export's field groups ("Export to blob storage", Field selection); core is required.
FIELD_GROUPS: dict[str, tuple[str, ...]] = {
    "core": ("end_time", "id", "parent_observation_id", "project_id", "start_time", "trace_id", "type"),
    "basic": ("bookmarked", "environment", "is_root_observation", "level", "name", "public", "session_id",
              "status_message", "user_id", "version"),
    "time": ("completion_start_time", "created_at", "updated_at"),
    "io": ("input", "output"),
    "metadata": ("metadata",),
    "model": ("input_price", "model_id", "model_parameters", "output_price", "provided_model_name", "total_price"),
    "usage": ("cost_details", "total_cost", "usage_details", "usage_pricing_tier_id", "usage_pricing_tier_name"),
    "prompt": ("prompt_id", "prompt_name", "prompt_version"),
    "metrics": ("latency", "time_to_first_token"),
    "trace_context": ("release", "tags", "trace_name"),
    "tools": ("tool_call_names", "tool_calls", "tool_definitions"),
}
TRACE = "lf-trace/one"  # Langfuse ids are any string
OTHER_TRACE = "7f3d2a"


def _observation(oid: str, trace: str, otype: str, name: str, parent: str, start: str, end: str | None,
                 **fields: Any) -> dict[str, Any]:
    """One enriched observation with every field of the reference."""
    record: dict[str, Any] = {
        "id": oid, "trace_id": trace, "project_id": "proj-x", "environment": "production", "type": otype,
        "parent_observation_id": parent, "start_time": start, "end_time": end, "name": name,
        "metadata": {"step": oid}, "level": "DEFAULT", "status_message": "", "version": "",
        "input": f"input of {oid}", "output": f"output of {oid}", "provided_model_name": "", "model_parameters": "",
        "usage_details": {}, "cost_details": {}, "completion_start_time": None, "prompt_name": "",
        "prompt_version": None, "total_cost": 0.0, "latency": None, "time_to_first_token": None, "model_id": "",
        "created_at": start, "updated_at": start, "prompt_id": "", "tool_calls": [], "tool_call_names": [],
        "tool_definitions": {}, "usage_pricing_tier_id": None, "usage_pricing_tier_name": None,
        "input_price": None, "output_price": None, "total_price": None, "is_root_observation": parent == "",
        "user_id": "user-7", "session_id": "session-3" if trace == TRACE else "session-4",
        "trace_name": "support-agent", "tags": ["a", "b"], "release": "1.0", "bookmarked": False, "public": False,
    }
    record.update(fields)
    return record


def enriched_observations() -> list[dict[str, Any]]:
    return [
        _observation("obs-root", TRACE, "AGENT", "planner", "", "2026-11-30 10:00:00.000000",
                     "2026-11-30 10:00:05.000000"),
        _observation("obs-llm", TRACE, "GENERATION", "chat", "obs-root", "2026-11-30 10:00:01.000000",
                     "2026-11-30 10:00:02.500000", provided_model_name="gpt-4o",
                     model_parameters='{"temperature":0.2}', usage_details={"input": 120, "output": 30, "total": 150},
                     cost_details={"input": 0.001, "output": 0.002}, total_cost=0.003, latency=1.5),
        _observation("obs-tool", TRACE, "TOOL", "search", "obs-root", "2026-11-30 10:00:03.000000",
                     "2026-11-30 10:00:04.000000", level="ERROR", status_message="search timed out",
                     tool_call_names=["search"], tool_calls=['{"name":"search"}']),
        _observation("obs-solo", OTHER_TRACE, "SPAN", "lookup", "", "2026-11-30 11:00:00.000000",
                     "2026-11-30 11:00:01.000000", output=""),
    ]


def scores() -> list[dict[str, Any]]:
    def score(sid: str, trace: str | None, obs: str | None, name: str, data_type: str, value: float,
              string_value: str | None, source: str, comment: str | None) -> dict[str, Any]:
        return {"id": sid, "timestamp": "2026-11-30 12:00:00.000000", "project_id": "proj-x",
                "environment": "production", "trace_id": trace, "observation_id": obs, "session_id": None,
                "dataset_run_id": None, "name": name, "value": value, "source": source, "comment": comment,
                "data_type": data_type, "string_value": string_value, "created_at": "2026-11-30 12:00:00.000000",
                "updated_at": "2026-11-30 12:00:00.000000"}

    return [
        score("s-cat", TRACE, "obs-tool", "failure_mode", "CATEGORICAL", 2, "tool_timeout", "ANNOTATION",
              "the tool never answered"),
        score("s-bool", TRACE, None, "hallucination", "BOOLEAN", 1, "True", "EVAL", "judge says so"),
        score("s-num", TRACE, "obs-llm", "helpfulness", "NUMERIC", 0.25, None, "API", None),
        score("s-text", OTHER_TRACE, None, "note", "TEXT", 0, "looks fine", "ANNOTATION", None),
    ]


def legacy_traces() -> list[dict[str, Any]]:
    def trace(tid: str, session: str) -> dict[str, Any]:
        return {"id": tid, "timestamp": "2026-11-30 10:00:00.000000", "name": "support-agent",
                "environment": "production", "project_id": "proj-x", "metadata": {"team": "blue"},
                "user_id": "user-7", "session_id": session, "release": "1.0", "version": None, "public": False,
                "bookmarked": False, "tags": ["a", "b"], "input": "the question", "output": "the answer",
                "created_at": "2026-11-30 10:00:00.000000", "updated_at": "2026-11-30 10:00:00.000000"}

    return [trace(TRACE, "session-3"), trace(OTHER_TRACE, "session-4")]


def legacy_observations(groups: tuple[str, ...] = tuple(FIELD_GROUPS)) -> list[dict[str, Any]]:
    """The legacy observations/ rows: no trace context, a root's parent null, not empty."""
    keep = _fields(groups) - set(FIELD_GROUPS["trace_context"]) - {"user_id", "session_id", "bookmarked", "public",
                                                                    "is_root_observation", "usage_pricing_tier_id"}
    return [{k: (None if k == "parent_observation_id" and v == "" else v) for k, v in record.items() if k in keep}
            for record in enriched_observations()]


def _fields(groups: tuple[str, ...]) -> set[str]:
    return {f for group in ("core", *groups) for f in FIELD_GROUPS[group]}


def only_groups(records: list[dict[str, Any]], groups: tuple[str, ...]) -> list[dict[str, Any]]:
    keep = _fields(groups)
    return [{k: v for k, v in record.items() if k in keep} for record in records]


# -- writers, each as the reference's notes on its format say -----------------------------------------


def write(path: Path, records: list[dict[str, Any]]) -> Path:
    """``records`` in the format ``path``'s name says (.parquet, .jsonl, .json, .csv, + .gz)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    name = path.name.removesuffix(".gz")
    if name.endswith(".parquet"):
        _write_parquet(path, records)
        return path
    if name.endswith(".csv"):
        text = _csv_text(records)
    elif name.endswith(".jsonl"):
        text = "".join(json.dumps(r) + "\n" for r in records)
    else:
        text = json.dumps(records, indent=1)
    data = text.encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path


def _csv_text(records: list[dict[str, Any]]) -> str:
    """Every value text: null empty, booleans true/false, arrays and objects as JSON."""
    header = list(dict.fromkeys(k for r in records for k in r))
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(header)
    for record in records:
        row = []
        for key in header:
            value = record.get(key)
            row.append("" if value is None else "true" if value is True else "false" if value is False
                       else json.dumps(value) if isinstance(value, dict | list) else str(value))
        writer.writerow(row)
    return out.getvalue()


_MAPS = {"usage_details": pa.map_(pa.string(), pa.int64()), "cost_details": pa.map_(pa.string(), pa.float64())}


def _write_parquet(path: Path, records: list[dict[str, Any]]) -> None:
    """As Langfuse's Parquet: usage and cost as maps, metadata and other objects as JSON text."""
    columns: dict[str, pa.Array] = {}
    for key in dict.fromkeys(k for r in records for k in r):
        values = [r.get(key) for r in records]
        if key in _MAPS:
            columns[key] = pa.array([list((v or {}).items()) for v in values], type=_MAPS[key])
        elif any(isinstance(v, dict) for v in values):
            columns[key] = pa.array([None if v is None else json.dumps(v) for v in values], type=pa.string())
        elif key in ("tool_calls", "tool_call_names", "tags"):
            columns[key] = pa.array(values, type=pa.list_(pa.string()))
        else:
            columns[key] = pa.array(values)
    pq.write_table(pa.table(columns), path)


def export(root: Path, fmt: str, groups: tuple[str, ...] = tuple(FIELD_GROUPS), legacy: bool = False) -> Path:
    """A project folder as Langfuse writes it, the observations split over two export windows."""
    project = root / "proj-x"
    if legacy:
        rows = legacy_observations(groups)
        write(project / "traces" / f"20261130T100000Z.{fmt}", legacy_traces())
        folder = "observations"
    else:
        rows = only_groups(enriched_observations(), groups)
        folder = "observations_v2"
    write(project / folder / f"20261130T100000Z.{fmt}", rows[:2])
    write(project / folder / f"20261130T110000Z.{fmt}", rows[2:])
    write(project / "scores" / f"20261130T120000Z.{fmt}", scores())
    (project / "manifests").mkdir()
    (project / "manifests" / "20261130T120000Z.json").write_text('{"files": []}')  # not a data file
    return root
