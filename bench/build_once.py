"""One `tracehouse build`, as the CLI runs it, with what the CLI does not print: run by bench/run.py in
its own process to measure what recording a build in the warehouse's Dagster instance costs.

    python bench/build_once.py WAREHOUSE SOURCE_SPEC [--no-record]   -> one JSON line on stdout

``run_build`` (pipelines/interfaces/build.py) runs the build's steps in ``<warehouse>/.dagster``
(pipelines/builds/run_history.py), or with ``record_in_dagster=False`` in an ephemeral instance that keeps
nothing; the CLI has no flag for that, so this calls it the way ``cmd_build`` does, either way. It
prints the build's own seconds, the number of events its runs stored and the duration of each step
of its runs.
"""

from __future__ import annotations

import json
import os
import sys
import time

STARTED = time.perf_counter()


def main(argv: list[str]) -> int:
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    record = "--no-record" not in argv
    warehouse, source = [a for a in argv if not a.startswith("--")][:2]
    import dagster as dg

    from pipelines.builds.run_history import instance_for
    from pipelines.config import load_settings
    from pipelines.interfaces.build import run_build
    from pipelines.storage.warehouse import Warehouse

    imported = time.perf_counter() - STARTED
    settings = load_settings(warehouse, [source])
    instance = None if record else dg.DagsterInstance.ephemeral()
    summary = run_build(settings, progress=False, instance=instance, record_in_dagster=record)
    instance = instance or instance_for(Warehouse(settings.warehouse))
    steps: dict[str, float] = {}
    events = 0
    for run in instance.get_runs():
        events += len(instance.all_logs(run.run_id))
        for stat in instance.get_run_step_stats(run.run_id):
            if stat.start_time is not None and stat.end_time is not None:
                steps[stat.step_key] = steps.get(stat.step_key, 0.0) + stat.end_time - stat.start_time
    print(json.dumps({
        "record_in_dagster": record, "exit_code": summary.exit_code, "build": summary.build,
        "build_s": summary.seconds, "events": events, "imports_s": imported,
        "steps_s": dict(sorted(steps.items(), key=lambda kv: -kv[1])),
    }))
    return 0 if summary.exit_code in (0, 3) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
