"""Rebuilds that follow the data: a sensor on the source folders, a daily consistency pass, and a
check for new Hub revisions. All start stopped; switch them on in the UI (Automation tab) with
``dagster-daemon`` running (``tracehouse ui`` starts one).

After a table partition is rebuilt, the marts, database and dashboard follow through declarative
automation (``AutomationCondition.eager()``, applied once in ``pipelines/defs/__init__.py``).
"""

import hashlib
import json

import dagster as dg

from pipelines import schema
from pipelines.config import load_settings
from pipelines.defs.partitions import source_splits
from pipelines.defs.resources import PartitionFiles, TracehouseResource
from pipelines.defs.warehouse import FULL_TAG
from pipelines.ingest import load_manifest
from pipelines.storage import Warehouse

TABLE_KEYS = [dg.AssetKey(name) for name in schema.TABLES]


def fingerprint_files(entries: list[tuple[str, int, int]]) -> str:
    """A short digest of (path, size, mtime) for every file of a partition."""
    return hashlib.sha256(json.dumps(sorted(entries)).encode()).hexdigest()[:16]


def current_fingerprint(part: PartitionFiles) -> str:
    entries = []
    for file in part.files:
        stat = file.path.stat()
        entries.append((file.relpath, stat.st_size, stat.st_mtime_ns))
    return fingerprint_files(entries)


def published_fingerprint(warehouse: Warehouse, key: str) -> str | None:
    manifest = load_manifest(warehouse.current(key))
    if manifest is None:
        return None
    return fingerprint_files([(e["file"], e["size"], e["mtime_ns"]) for e in manifest["files"]])


def changed_partitions(tracehouse: TracehouseResource) -> tuple[dict[str, str], list[str]]:
    """Partitions whose files differ from their published generation, and published ones now gone."""
    warehouse = tracehouse.wh
    now = {key: current_fingerprint(part) for key, part in tracehouse.partitions().items()}
    changed = {key: fp for key, fp in now.items() if published_fingerprint(warehouse, key) != fp}
    removed = [key for key in warehouse.partitions() if key not in now]
    return changed, removed


@dg.sensor(
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.STOPPED,
    asset_selection=TABLE_KEYS,
    description="Requests a table run for exactly the source splits whose files were added, changed or deleted.",
)
def source_files_sensor(context: dg.SensorEvaluationContext, tracehouse: TracehouseResource) -> dg.SensorResult:
    changed, removed = changed_partitions(tracehouse)
    known = set(context.instance.get_dynamic_partitions(source_splits.name))
    new_keys = sorted(k for k in [*changed, *removed] if k not in known)
    runs = [
        dg.RunRequest(partition_key=key, asset_selection=TABLE_KEYS, run_key=f"{key}:{fp}")
        for key, fp in sorted(changed.items())
    ] + [dg.RunRequest(partition_key=key, asset_selection=TABLE_KEYS, run_key=f"{key}:removed") for key in removed]
    return dg.SensorResult(
        run_requests=runs,
        dynamic_partitions_requests=[source_splits.build_add_request(new_keys)] if new_keys else [],
        cursor=json.dumps({**changed, **dict.fromkeys(removed, "removed")}, sort_keys=True),
        skip_reason=None if runs else "no source file changed",
    )


def consistency_pass_requests(tracehouse: TracehouseResource, tick: str) -> list[dg.RunRequest]:
    """Every partition re-read in full, so drift between files and tables cannot outlive a day."""
    return [
        dg.RunRequest(partition_key=key, asset_selection=TABLE_KEYS, tags={FULL_TAG: "true"}, run_key=f"{key}:{tick}")
        for key in tracehouse.partitions()
    ]


consistency_pass_schedule_name = "consistency_pass_schedule"


def _consistency_schedule(cron: str) -> dg.ScheduleDefinition:
    @dg.schedule(
        cron_schedule=cron,
        target=TABLE_KEYS,
        default_status=dg.DefaultScheduleStatus.STOPPED,
        name=consistency_pass_schedule_name,
        description="Full re-read of every source split (default daily 03:00; [schedule] cron in tracehouse.toml).",
    )
    def consistency_pass_schedule(context: dg.ScheduleEvaluationContext, tracehouse: TracehouseResource):
        partitions = list(tracehouse.partitions())
        known = set(context.instance.get_dynamic_partitions(source_splits.name))
        missing = [k for k in partitions if k not in known]
        if missing:
            context.instance.add_dynamic_partitions(source_splits.name, missing)
        return consistency_pass_requests(tracehouse, context.scheduled_execution_time.isoformat())

    return consistency_pass_schedule


class HubFetchConfig(dg.Config):
    kind: str
    dest: str
    revision: str | None = None
    repo_id: str | None = None


@dg.op(description="Download a dataset revision from the Hugging Face Hub into its source folder.")
def fetch_hub_dataset(context: dg.OpExecutionContext, config: HubFetchConfig) -> None:
    from pathlib import Path

    from pipelines.hub import fetch

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
    from pipelines.hub import HubError, recorded, remote_revision

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
