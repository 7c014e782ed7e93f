"""The Dagster run of one ``tracehouse build``: the build job (pipelines.defs.warehouse.build_job)
executed in-process in the warehouse's instance, and what its events say about the build."""

from __future__ import annotations

import dagster as dg

from pipelines.builds.step_errors import cause
from pipelines.builds.summary import BuildSummary
from pipelines.defs import DOMAINS
from pipelines.defs.resources import TracehouseResource
from pipelines.defs.warehouse import BUILD_JOB


def run_config(verbose: bool) -> dict:
    """Dagster's console logger: its errors (with stack traces) only with --verbose; the build's own
    summary names every failure in one line."""
    return {"loggers": {"console": {"config": {"log_level": "ERROR" if verbose else "CRITICAL"}}}}


def build_job(resource: TracehouseResource) -> dg.JobDefinition:
    """The build job bound to this build's resource (no sensors or schedules: a build starts none);
    every asset returns a MaterializeResult, so no output reaches an IO manager and the in-memory one
    is enough."""
    defs = dg.Definitions.merge(*DOMAINS, dg.Definitions(resources={"tracehouse": resource,
                                                                    "io_manager": dg.mem_io_manager}))
    return defs.resolve_job_def(BUILD_JOB)


def execute(job: dg.JobDefinition, instance: dg.DagsterInstance, summary: BuildSummary, tags: dict[str, str],
            verbose: bool) -> None:
    """Run the build's job in-process, a run of ``instance``; collect its failures into ``summary``.
    Ctrl-C during the run, which Dagster turns into a step's DagsterExecutionInterruptedError and the
    end of the run, is raised again as KeyboardInterrupt once the run has ended: an interrupted
    build, not a failed one."""
    result = job.execute_in_process(run_config=run_config(verbose), instance=instance, raise_on_error=False,
                                    tags=tags)
    for dagster_event in result.all_events:
        if dagster_event.event_type_value == "ASSET_CHECK_EVALUATION":
            evaluation = dagster_event.event_specific_data
            if not evaluation.passed:
                failed, warned = check_failures(evaluation)
                summary.failed_checks.extend(failed)
                summary.warned_checks.extend(warned)
        elif dagster_event.event_type_value == "STEP_FAILURE":
            error = dagster_event.event_specific_data.error
            if error is not None and error.cls_name == "DagsterAssetCheckFailedError":
                continue  # a blocking check failed: named in failed_checks; the commit did not run
            if error is not None and error.cls_name == dg.DagsterExecutionInterruptedError.__name__:
                raise KeyboardInterrupt  # Ctrl-C: the run has ended, and the build was interrupted
            summary.failed_steps.append(f"{dagster_event.step_key}: {cause(error)}")


def check_failures(evaluation: dg.AssetCheckEvaluation) -> tuple[list[str], list[str]]:
    """What a failed asset check names in the summary, blocking and not: a table's checks each as
    ``table:check`` (its result lists them in ``failed_checks`` and ``warned_checks``), a mart's
    with its failed tests, by the result's severity."""
    asset = evaluation.asset_key.to_user_string()
    metadata = evaluation.metadata
    if "failed_checks" in metadata or "warned_checks" in metadata:
        def named(key: str) -> list[str]:
            listed = str(metadata[key].value) if key in metadata else ""
            return [f"{asset}:{name}" for name in listed.split(", ") if name]

        return named("failed_checks"), named("warned_checks")
    name = f"{asset}:{evaluation.check_name}"
    if failed_tests := metadata.get("failed_tests"):  # a mart's declared tests
        name += f" ({failed_tests.value})"
    return ([], [name]) if evaluation.severity == dg.AssetCheckSeverity.WARN else ([name], [])


def open_instance(warehouse, given: dg.DagsterInstance | None, record: bool) -> dg.DagsterInstance:
    """The instance the build's run goes to: the caller's, else the warehouse's own (where the UI
    shows the runs), else (``record`` off) one that keeps nothing; runs a killed build left
    "started" are reported as failed first."""
    from pipelines.builds.run_history import instance_for, settle_interrupted_runs

    instance = given or (instance_for(warehouse) if record else dg.DagsterInstance.ephemeral())
    settle_interrupted_runs(instance)
    return instance
