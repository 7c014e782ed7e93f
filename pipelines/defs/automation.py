"""Rebuilds that follow the data: a sensor on the source folders, a daily consistency pass, and a
check for new Hub revisions. All start stopped; switch them on in the UI (Automation tab) with
``dagster-daemon`` running (``tracehouse ui`` starts one).

Each starts a run of the build job (``tracehouse_build``): the same run ``tracehouse build`` makes,
which flattens what changed, checks it, computes the marts and dashboard and commits.
"""

import hashlib
import json

import dagster as dg

from pipelines.builds.changes import files_fingerprint
from pipelines.builds.flattening import list_sources
from pipelines.builds.plan import plan_splits
from pipelines.config import SourceUnavailable, load_settings
from pipelines.defs.resources import TracehouseResource
from pipelines.defs.warehouse import FULL_TAG, build_job
from pipelines.storage.records import Snapshot
from pipelines.storage.state import CommitLog


def changed_partitions(tracehouse: TracehouseResource) -> tuple[dict[str, str], list[str]]:
    """Splits the build's dry plan would read or take over (their files differ from the last
    committed build's) -> their files' fingerprint, and committed ones now gone. Raises
    SourceUnavailable for a source the committed build holds rows of that lists no files now
    (pipelines.builds.plan.emptied_sources): its splits are not "gone", its folder is (a mistyped path, an
    unmounted disk)."""
    record = CommitLog(tracehouse.wh).latest()
    committed = record.snapshot.partitions if record else {}
    found = list_sources(tracehouse.wh, tracehouse.resolved_sources(), committed=committed,
                         build=record.build if record else None)
    plan = plan_splits(tracehouse.wh, found, Snapshot(dict(committed)), committed)
    changed = {key: files_fingerprint(found[key].source.kind, found[key].files) for key in plan.keys("ingest", "adopt")}
    return changed, plan.removed


@dg.sensor(
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.STOPPED,
    job=build_job,
    description="Requests a build when source files were added, changed or deleted (one run per set of "
    "changes); skips (saying why) while a source the warehouse holds rows of lists no files.",
)
def source_files_sensor(context: dg.SensorEvaluationContext, tracehouse: TracehouseResource) -> dg.SensorResult:
    try:
        changed, removed = changed_partitions(tracehouse)
    except SourceUnavailable as exc:  # no run: a commit now would delete the source's rows
        context.log.warning(str(exc))
        return dg.SensorResult(skip_reason=f"not rebuilding: {exc}")
    changes = json.dumps({**changed, **dict.fromkeys(removed, "removed")}, sort_keys=True)
    runs = [dg.RunRequest(run_key=hashlib.sha256(changes.encode()).hexdigest()[:16],
                          tags={"tracehouse/changed": ", ".join(sorted([*changed, *removed]))[:1000]})]
    return dg.SensorResult(
        run_requests=runs if changed or removed else [],
        cursor=changes,
        skip_reason=None if changed or removed else "no source file changed",
    )


consistency_pass_schedule_name = "consistency_pass_schedule"


def _consistency_schedule(cron: str) -> dg.ScheduleDefinition:
    """Every split re-read in full, so drift between files and tables cannot outlive a day."""
    return dg.ScheduleDefinition(
        name=consistency_pass_schedule_name,
        cron_schedule=cron,
        job=build_job,
        tags={FULL_TAG: "true"},
        default_status=dg.DefaultScheduleStatus.STOPPED,
        description="Full re-read of every source split (default daily 03:00; [schedule] cron in tracehouse.toml).",
    )


class HubFetchConfig(dg.Config):
    kind: str
    dest: str
    revision: str | None = None
    repo_id: str | None = None


@dg.op(description="Download a dataset revision from the Hugging Face Hub into its source folder.")
def fetch_hub_dataset(context: dg.OpExecutionContext, config: HubFetchConfig) -> None:
    from pathlib import Path

    from pipelines.storage.hub import fetch

    record = fetch(config.kind, Path(config.dest), config.revision, config.repo_id)
    context.log.info(f"fetched {record.repo_id}@{record.revision}: {record.files} files into {config.dest}")


@dg.job(description="Fetch a Hub dataset; the source_files_sensor then rebuilds what changed.")
def hub_fetch_job():
    fetch_hub_dataset()


@dg.sensor(
    job=hub_fetch_job,
    minimum_interval_seconds=6 * 3600,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description="Checks the Hub for a new revision of each [[hub]] dataset and fetches it.",
)
def hub_revision_sensor(context: dg.SensorEvaluationContext):
    from pipelines.storage.hub import HubError, recorded, remote_revision

    for hub in load_settings(require_paths=False).hub:
        try:
            latest = remote_revision(hub.kind, hub.repo_id, hub.revision)
        except HubError as exc:
            context.log.warning(str(exc))
            continue
        have = recorded(hub.dest)
        if have is None or have.revision != latest:
            yield dg.RunRequest(
                run_key=f"{hub.kind}:{latest}",
                run_config={"ops": {"fetch_hub_dataset": {"config": {
                    "kind": hub.kind, "dest": str(hub.dest), "revision": latest, "repo_id": hub.repo_id,
                }}}},
            )


def build_automation_defs(cron: str) -> dg.Definitions:
    return dg.Definitions(
        sensors=[source_files_sensor, hub_revision_sensor],
        schedules=[_consistency_schedule(cron)],
        jobs=[hub_fetch_job],
    )
