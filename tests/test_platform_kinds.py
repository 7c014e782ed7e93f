"""The platforms' own kinds in the shared vocabulary, on a real build of a Langfuse export written to
its field reference (tests/test_langfuse.py): an observation's type gives its operation a
cross-system operation type (sql/seeds/operation_types.csv, through the operation_type() macro), as
an MLflow span's type does, and each failure view says who labelled (annotations.annotator_kind)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import build_warehouse, query
from langfuse_exports import export

from pipelines.storage.warehouse import Warehouse

# Langfuse's observation types and MLflow's span types (mlflow.entities.SpanType), each with the
# shared operation type its documented meaning is; a kind that says nothing of the work is 'other'.
LANGFUSE_TYPES = {"GENERATION": "response", "AGENT": "delegation", "TOOL": "tool_use", "CHAIN": "planning",
                  "RETRIEVER": "retrieval", "EVALUATOR": "judge", "EMBEDDING": "embedding",
                  "GUARDRAIL": "verification", "SPAN": "other", "EVENT": "other"}
MLFLOW_TYPES = {"LLM": "response", "CHAT_MODEL": "response", "RETRIEVER": "retrieval", "TOOL": "tool_use",
                "AGENT": "delegation", "CHAIN": "planning", "PARSER": "extraction", "EMBEDDING": "embedding",
                "RERANKER": "retrieval", "MEMORY": "update", "UNKNOWN": "other"}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("platform-kinds")
    export(root / "export", "jsonl")
    warehouse = root / "warehouse"
    summary = build_warehouse(warehouse, [f"lf:langfuse={root / 'export'}"])
    assert summary.exit_code == 0, summary
    return warehouse


def test_a_langfuse_generation_is_an_llm_call(built: Path) -> None:
    typed = query(built, "select o.op_id, o.category, operation_type(g.system, o.op_name, o.category) "
                         "from operations o join graphs g using (graph_id) order by all")
    assert typed == [("obs-llm", "GENERATION", "response"), ("obs-root", "AGENT", "delegation"),
                     ("obs-solo", "SPAN", "other"), ("obs-tool", "TOOL", "tool_use")]


@pytest.mark.parametrize(("kind", "expected"), [*LANGFUSE_TYPES.items(), *MLFLOW_TYPES.items()])
def test_every_platform_kind_has_its_operation_type(built: Path, kind: str, expected: str) -> None:
    """Any system, an op name no name rule knows: the kind alone decides."""
    assert query(built, "select operation_type('some-agent', 'my step', ?)", [kind]) == [(expected,)]


def test_each_failure_view_says_who_labelled_the_score(built: Path) -> None:
    """A Langfuse ANNOTATION score is a human's label, an EVAL score a judge's (llm): the view says so
    beside the provenance."""
    from dashboards.failure_view import failure_view_path

    home = Warehouse(built)
    record = home.committed()
    rows = query(built, "select annotation_id, graph_id, provenance, annotator_kind from annotations order by all")
    assert sorted(kind for *_, kind in rows) == ["human", "llm"]
    for annotation_id, graph_id, provenance, kind in rows:
        html = failure_view_path(home, record, annotation_id).read_text()
        [line] = re.findall(r'<dd id="provenance">(.*?)</dd>', html, re.S)
        assert " ".join(re.sub(r"<[^>]+>", "", line).split()) == f"{graph_id} · {provenance} · labelled by {kind}"
