"""Per-source reader options: declared in tracehouse.toml's source table, checked against what the
kind's reader declares, recorded in the build record, and part of the source's partitions'
fingerprints, so that changing one re-reads that source's partitions and nothing else.

Exercised with the langfuse kind's ``failure_scores`` on exports written to Langfuse's field reference
(observations_v2/ and scores/ as JSON lines): two sources of the same kind, only one of which sets it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import query

from pipelines.config import load_settings
from pipelines.errors import ConfigError
from pipelines.interfaces.build import run_build
from pipelines.storage.records import latest_record
from pipelines.storage.warehouse import Warehouse, partition_key

WHEN = "2026-11-30 10:00:0{}.000000"


def observation(oid: str, trace: str, otype: str, parent: str | None, second: int) -> dict[str, Any]:
    """An enriched observation with the core and io field groups."""
    return {"id": oid, "trace_id": trace, "project_id": "proj", "type": otype, "parent_observation_id": parent,
            "start_time": WHEN.format(second), "end_time": WHEN.format(second + 1), "name": oid,
            "input": f"input of {oid}", "output": f"output of {oid}"}


def score(sid: str, trace: str, obs: str | None, name: str, data_type: str, value: float,
          string_value: str | None) -> dict[str, Any]:
    return {"id": sid, "timestamp": WHEN.format(9), "project_id": "proj", "environment": "production",
            "trace_id": trace, "observation_id": obs, "session_id": None, "dataset_run_id": None, "name": name,
            "value": value, "source": "ANNOTATION", "comment": f"comment {sid}", "data_type": data_type,
            "string_value": string_value, "created_at": WHEN.format(9), "updated_at": WHEN.format(9)}


def write_export(root: Path, project: str, trace: str) -> None:
    """One project of a Langfuse export: a trace of two observations with a CATEGORICAL score named
    failure_mode on its tool call, a BOOLEAN one named hallucination on the trace and a NUMERIC one."""
    folder = root / project
    rows = {
        "observations_v2": [observation(f"{trace}-agent", trace, "AGENT", None, 0),
                            observation(f"{trace}-tool", trace, "TOOL", f"{trace}-agent", 2)],
        "scores": [score(f"{trace}-s1", trace, f"{trace}-tool", "failure_mode", "CATEGORICAL", 1, "tool_timeout"),
                   score(f"{trace}-s2", trace, None, "hallucination", "BOOLEAN", 1, "True"),
                   score(f"{trace}-s3", trace, f"{trace}-agent", "helpfulness", "NUMERIC", 0.5, None)],
    }
    for table, records in rows.items():
        (folder / table).mkdir(parents=True)
        (folder / table / "20261130T100000Z.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def write_config(path: Path, lf_options: str = "") -> Path:
    """tracehouse.toml with two langfuse sources, ``lf`` with the option lines ``lf_options``."""
    options = f"[sources.options]\n{lf_options}\n" if lf_options else ""
    path.write_text('warehouse = "warehouse"\n\n'
                    f'[[sources]]\nname = "lf"\nkind = "langfuse"\npath = "export-lf"\n{options}\n'
                    '[[sources]]\nname = "other"\nkind = "langfuse"\npath = "export-other"\n')
    return path


def labels(warehouse: Path) -> list[tuple]:
    return query(warehouse, "select graph_id, taxonomy, error_type from annotations order by graph_id, taxonomy")


def test_failure_scores_changes_only_its_sources_partitions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_export(tmp_path / "export-lf", "proj-a", "ta")
    write_export(tmp_path / "export-other", "proj-b", "tb")
    config = write_config(tmp_path / "tracehouse.toml")
    warehouse = tmp_path / "warehouse"
    lf, other = partition_key("lf", "proj-a"), partition_key("other", "proj-b")

    first = run_build(load_settings(config=str(config)), progress=False)
    assert first.exit_code == 0, first
    assert sorted(first.partitions_built) == sorted([lf, other])
    both = [("langfuse:ta", "failure_mode", "tool_timeout"), ("langfuse:ta", "hallucination", "True"),
            ("langfuse:tb", "failure_mode", "tool_timeout"), ("langfuse:tb", "hallucination", "True")]
    assert labels(warehouse) == both  # the default: every CATEGORICAL and BOOLEAN score
    assert "options" not in next(s for s in latest_record(Warehouse(warehouse).builds_dir).sources
                                 if s["name"] == "lf")

    write_config(config, 'failure_scores = ["failure_mode"]')
    settings = load_settings(config=str(config))
    second = run_build(settings, progress=False)
    assert second.exit_code == 0, second
    assert second.partitions_built == [lf]  # read again with the option ...
    assert second.partitions_unchanged == [other]  # ... and the other source's split kept as it was
    assert labels(warehouse) == [both[0], *both[2:]]
    # the score no longer a label stays countable in its trace's metadata, as the NUMERIC one is
    metadata = json.loads(query(warehouse, "select metadata from graphs where graph_id = 'langfuse:ta'")[0][0])
    assert sorted(s["name"] for s in metadata["scores"]) == ["hallucination"]
    record = latest_record(Warehouse(warehouse).builds_dir)
    assert next(s for s in record.sources if s["name"] == "lf")["options"] == {"failure_scores": ["failure_mode"]}
    assert "options" not in next(s for s in record.sources if s["name"] == "other")

    # A Dagster run's resource carries the options with its NAME:KIND=PATH sources.
    from pipelines.defs.resources import TracehouseResource

    assert TracehouseResource.from_settings(settings).resolved_sources() == settings.sources

    # Without tracehouse.toml a build rebuilds the recorded sources, options included: nothing to do.
    monkeypatch.setenv("TRACEHOUSE_CONFIG", str(tmp_path / "no-such.toml"))
    third = run_build(load_settings(str(warehouse)), progress=False)
    assert third.exit_code == 0, third
    assert third.partitions_built == [] and sorted(third.partitions_unchanged) == sorted([lf, other])
    assert labels(warehouse) == [both[0], *both[2:]]


@pytest.mark.parametrize(("kind", "lines", "said"), [
    ("langfuse", 'failure_score = ["failure_mode"]',
     "source lf: unknown option 'failure_score' for kind langfuse (known: failure_scores)"),
    ("langfuse", 'failure_scores = "failure_mode"',
     "source lf: option 'failure_scores' of kind langfuse must be a list of strings, got 'failure_mode'"),
    ("whowhen", 'failure_scores = ["x"]',
     "source lf: unknown option 'failure_scores' for kind whowhen (kind whowhen takes no options)"),
])
def test_an_option_the_kind_does_not_take_is_refused(tmp_path: Path, kind: str, lines: str, said: str) -> None:
    (tmp_path / "export").mkdir()
    config = tmp_path / "tracehouse.toml"
    config.write_text(f'[[sources]]\nname = "lf"\nkind = "{kind}"\npath = "export"\n[sources.options]\n{lines}\n')
    with pytest.raises(ConfigError) as refused:
        load_settings(config=str(config))
    assert str(refused.value) == said


def test_options_must_be_a_table(tmp_path: Path) -> None:
    (tmp_path / "export").mkdir()
    config = tmp_path / "tracehouse.toml"
    config.write_text('[[sources]]\nkind = "langfuse"\npath = "export"\noptions = "failure_mode"\n')
    with pytest.raises(ConfigError, match=r"sources\[0\] options must be a table"):
        load_settings(config=str(config))
