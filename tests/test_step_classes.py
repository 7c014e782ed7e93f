"""What a multi-agent step does: the seed's step rules (sql/seeds/step_rules.csv) on the message's
label, role and content, and the operation type the seed operation_types.csv gives each step kind.

* One Who&When-shaped record per framework convention, read by the real reader: each step lands in
  the class its format says (a WebSurfer action, AutoGen's executor output, a code block, TERMINATE,
  MetaGPT's RoleZero prompt and commands, Magentic-One's ledger, ...).
* The real Who&When and TracerTraj records: no operation type holds more than half of the failures
  (failure_modes_by_operation), and every class docs/MARTS.md names occurs.
* The rules are data: every pattern of the seed is valid for Python's re and for DuckDB's RE2.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from conftest import query

from pipelines import schema
from pipelines.readers.base import SourceFile
from pipelines.readers.tracertraj import read as read_tracertraj
from pipelines.readers.whowhen import read as read_whowhen

REPO = Path(__file__).resolve().parent.parent
MARTS_DOC = REPO / "docs" / "MARTS.md"
COMMAND = '```json\n[\n    {{\n        "command_name": "{name}",\n        "args": {{}}\n    }}\n]\n```'
ROLEZERO_PROMPT = (
    "{agent} thinking: \n# Past Experience\n<experience>\n\n# Tool State\n\n\n# Current Plan\n"
    "[GOAL] [Message] from Mike to Alex: Please implement the function.\nNo Plan \n\n\n# Current Task\n\n"
    'If you want to stop, use {{"command_name":"end"}} command.\n```json\n[\n    {{\n'
    '        "command_name": "ClassName.method_name" or "function_name",\n    }}\n]\n```'
)

# (system, agent label, content, the op_name the step must get): labels and texts follow each framework.
CASES: list[tuple[str, str, str, str]] = [
    ("magentic-one", "human", "How many studio albums did Mercedes Sosa publish?", "user_request"),
    ("magentic-one", "Orchestrator (thought)", "Initial plan:\n\nWe are working to address the following", "plan"),
    ("magentic-one", "Orchestrator (thought)", "Stalled.... Replanning...", "plan"),
    ("magentic-one", "Orchestrator (thought)", 'Updated Ledger:\n{\n  "is_request_satisfied": {}}', "verify"),
    ("magentic-one", "Orchestrator (thought)", "Request satisfied.", "verify"),
    ("magentic-one", "Orchestrator (thought)", "Next speaker FileSurfer", "delegate"),
    ("magentic-one", "Orchestrator (thought)", "Something the Orchestrator thinks", "plan"),
    ("magentic-one", "Orchestrator (-> WebSurfer)", "Please search for the paper ```python\nx = 1\n```", "delegate"),
    ("magentic-one", "WebSurfer", "I typed 'Mercedes Sosa' into the browser search bar.", "browse"),
    ("magentic-one", "WebSurfer", "Nothing to summarize", "browse"),
    ("magentic-one", "FileSurfer", "Address: file:///workspace/76.pdf\nTitle: 76.pdf", "read_file"),
    ("magentic-one", "Assistant", "Run this:\n```python\nprint(sum([1, 2]))\n```", "write_code"),
    ("magentic-one", "ComputerTerminal", "The script ran, then exited with an error", "code_execution"),
    ("magentic-one", "Orchestrator (termination condition)", "No agent selected.\n FINAL ANSWER: 3", "terminate"),
    ("captainagent", "Excel_Expert",
     "You are given: (1) a task and advises from your manager with a specific plan and (2) a general task."
     "\n```python\nfrom functions import perform_web_search\n```", "plan"),
    ("captainagent", "Computer_terminal", "exitcode: 0 (execution succeeded)\nCode output: 42", "code_execution"),
    ("captainagent", "Python_Expert", "exitcode: 1 (execution failed)\nCode output: x", "code_execution"),
    ("captainagent", "DataAnalysis_Expert", "Let's compute it:\n```python\nprint(6 * 7)\n```", "write_code"),
    ("captainagent", "Research_Expert", '```python\nresults = perform_web_search("Fubo team", count=1)\n```',
     "browse"),
    ("captainagent", "WebServing_Expert", "Address: bing: Wikipedia Dragon page\nTitle: Search", "browse"),
    ("captainagent", "Validation_Expert",
     "```python\nfrom functions import optical_character_recognition\n```", "tool_call"),
    ("captainagent", "Verification_Expert", "All findings are verified; the answer is 3.\n\nTERMINATE", "final_answer"),
    ("captainagent", "Geometry_Expert", "Let me double-check the area against the formula.", "verify"),
    ("captainagent", "Music_Expert", "### Plan\n1. List the albums.\n2. Count them.", "plan"),
    ("captainagent", "Polish_TV_Series_Expert", "The actor who played Ray is Bartosz Opania.", "agent_message"),
    ("metagpt", "Engineer", ROLEZERO_PROMPT.format(agent="Engineer"), "plan"),
    ("metagpt", "Team Leader", "Team Leader sends to Alex: Please implement the solution.", "delegate"),
    ("metagpt", "Team Leader", "Team Leader thinking: assign it.\n"
     + COMMAND.format(name="Plan.append_task") + COMMAND.format(name="TeamLeader.publish_message"), "plan"),
    ("metagpt", "Team Leader", "Team Leader thinking: Bob is done.\n"
     + COMMAND.format(name="Plan.finish_current_task") + COMMAND.format(name="TeamLeader.publish_message"),
     "delegate"),
    ("metagpt", "Team Leader", "Team Leader thinking: all done.\n"
     + COMMAND.format(name="Plan.finish_current_task") + COMMAND.format(name="end"), "final_answer"),
    ("metagpt", "Engineer", "Engineer thinking: the file is written.\n"
     + COMMAND.format(name="Plan.finish_current_task"), "verify"),
    ("metagpt", "Engineer", "Engineer thinking: write it.\n" + COMMAND.format(name="Editor.write"), "write_code"),
    ("metagpt", "Architect", "Architect thinking: the design.\n" + COMMAND.format(name="Editor.write"), "plan"),
    ("metagpt", "Architect", "Architect thinking: read the PRD.\n" + COMMAND.format(name="Editor.open_file"),
     "read_file"),
    ("metagpt", "Engineer", "Engineer thinking: test it.\n" + COMMAND.format(name="Terminal.run_command"),
     "code_execution"),
]


def documented_classes() -> list[str]:
    """The multi-agent step classes docs/MARTS.md names (its line 'Multi-agent step classes: ...')."""
    line = next(x for x in MARTS_DOC.read_text().splitlines() if x.startswith("Multi-agent step classes:"))
    return re.findall(r"`([a-z_]+)`", line)


def operation_types() -> dict[str, str]:
    """op_name -> operation type, from the seed's name rows (the ones the step kinds use)."""
    return {r["name"]: r["operation_type"] for r in schema.seed_rows("operation_types")
            if r["kind"] == "operation" and r["system"] == "*" and r["category"] == "*" and r["name"] != "*"}


def read_record(tmp_path: Path, split: str, history: list[dict[str, str]]) -> list[dict]:
    """The operations the Who&When reader makes of one record holding ``history``."""
    path = tmp_path / split / "1.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"question": "q", "history": history, "mistake_agent": "x", "mistake_step": "0"}))
    (rows,) = list(read_whowhen(SourceFile("whowhen", split, path, f"{split}/1.json")))
    return rows.tables["operations"].to_pylist()


@pytest.mark.parametrize("system", ["magentic-one", "captainagent", "metagpt"])
def test_each_step_is_classified_by_what_its_format_says_it_does(tmp_path: Path, system: str) -> None:
    cases = [c for c in CASES if c[0] == system]
    key = "role" if system == "magentic-one" else "name"
    history = [{key: label, "role": label if key == "role" else "assistant", "content": text}
               for _, label, text, _ in cases]
    if system == "metagpt":  # a TracerTraj JSON record, through the TracerTraj reader
        ops = read_tracertraj_json(tmp_path, history)
    else:  # the Who&When subset folder names the system
        ops = read_record(tmp_path, "Hand-Crafted" if system == "magentic-one" else "Algorithm-Generated", history)
    got = [(case[1], op["op_name"]) for case, op in zip(cases, ops, strict=True)]
    assert got == [(label, want) for _, label, _, want in cases]
    types = operation_types()
    assert all(op["op_name"] in types for op in ops)


def read_tracertraj_json(tmp_path: Path, history: list[dict[str, str]]) -> list[dict]:
    """The operations the TracerTraj reader makes of one JSON record (system MetaGPT by default)."""
    path = tmp_path / "tracertraj-code-x.json"
    path.write_text(json.dumps({"question": "q", "history": history, "mistake_agent": "x", "mistake_step": "0"}))
    (rows,) = list(read_tracertraj(SourceFile("tracertraj", "records", path, path.name)))
    assert rows.tables["graphs"].column("system").to_pylist() == ["metagpt"]
    return rows.tables["operations"].to_pylist()


def test_every_documented_class_is_an_operation_type_of_the_seed() -> None:
    classes = documented_classes()
    assert len(classes) == 8 and set(classes) <= set(operation_types().values())
    # and every step kind the rules give has a type among them (or the human's input)
    kinds = {r["op_name"] for r in schema.seed_rows("step_rules")}
    assert {operation_types()[k] for k in kinds} == set(classes) | {"input"}


def test_the_seed_patterns_are_valid_for_python_and_duckdb() -> None:
    """The reader applies the rules with Python's re; the patterns keep to what RE2 reads too, so the
    same rows can be applied in SQL (regexp_matches)."""
    con = duckdb.connect()
    try:
        for row in schema.seed_rows("step_rules"):
            for column in ("actor", "agent_role", "content"):
                if row[column] != "*":
                    re.compile(row[column])
                    con.execute("select regexp_matches('x', ?)", [row[column]]).fetchall()
    finally:
        con.close()
    assert schema.seed_rows("step_rules")[-1] | {"note": ""} == {
        "system": "*", "actor": "*", "agent_role": "*", "content": "*", "op_name": "agent_message",
        "category": "agent_message", "priority": "99", "note": ""}


def raw_failures(shared: Path) -> Counter[str]:
    """Failures per system, counted from the raw files (what the mart's totals must be)."""
    per_system: Counter[str] = Counter()
    for path in sorted((shared / "whowhen").glob("*/*.json")):
        per_system["magentic-one" if path.parent.name == "Hand-Crafted" else "captainagent"] += 1
    for path in sorted((shared / "tracertraj").glob("*.parquet")):
        per_system["metagpt"] += pq.read_metadata(path).num_rows
    return per_system


def test_no_class_holds_half_of_the_real_multi_agent_failures(multi_agent_warehouse, shared_data: Path) -> None:
    warehouse, summary = multi_agent_warehouse
    assert not summary.failed_steps, summary.failed_steps
    rows = query(warehouse, "select system, operation_type, sum(n) from failure_modes_by_operation "
                            "where graph_kind = 'multi_agent' group by all")
    per_system: Counter[str] = Counter()
    per_type: Counter[str] = Counter()
    for system, operation_type, n in rows:
        per_system[system] += n
        per_type[operation_type] += n
    assert per_system == raw_failures(shared_data)
    total = sum(per_type.values())
    assert max(per_type.values()) <= total / 2, per_type
    assert per_type["communication"] < total / 4, per_type  # no longer the bulk
    # every documented class occurs among the steps of the real records
    steps = dict(query(warehouse, "select operation_type(g.system, o.op_name, o.category) as t, count(*) "
                                  "from operations o join graph_kinds() g using (graph_id) "
                                  "where g.graph_kind = 'multi_agent' group by t"))
    missing = [c for c in documented_classes() if not steps.get(c)]
    assert not missing, (missing, steps)
