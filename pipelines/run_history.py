"""Record each committed build in the warehouse's own Dagster instance (``<warehouse>/.dagster``, the
one ``tracehouse ui`` opens), so its catalog, partitions and checks pages show the last build.

``tracehouse build`` runs its steps on an in-memory instance (:func:`build_instance`) that keeps no
events: a build writes ~500 of them (step starts, logs, outputs, check results), and even Dagster's
in-memory SQLite event log spent ~1.5 s of CPU a build storing them (py-spy, 32-graph corpus) for
nobody to read: the build takes its runs' events from their results. Its in-memory databases are
made without alembic's revision stamp (0.3 s a process, for databases never migrated). After the
commit, only what the UI shows is written here: one materialization per table per rebuilt partition,
one per mart, chart, page and commit, and one result per check, as runless events of the build
(their metadata names it). The instance keeps its event log in one SQLite file through
:class:`WarehouseEventLogStorage`, Dagster's consolidated SQLite storage with one connection pool
instead of a new engine per event: 80 events take 0.14 s instead of 0.45 s (BENCHMARKS.md); and a
build's events are stored in one transaction (one commit), 36 events in 0.07 s instead of 0.16 s.
A build opens only that event log (:func:`history_for`), not the instance's run and schedule
storages, which it does not write.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
from dagster._core.storage.event_log import ConsolidatedSqliteEventLogStorage, InMemoryEventLogStorage
from dagster._core.storage.event_log.base import EventLogCursor, EventRecordsResult
from dagster._core.storage.runs import InMemoryRunStorage

from pipelines import schema
from pipelines.plan import manifest_of
from pipelines.records import BuildRecord
from pipelines.storage import Warehouse

PARTITIONS = "source_splits"
BUILD_TAG = "tracehouse/build"
DAGSTER_YAML = """\
# Written by tracehouse: the instance `tracehouse ui` and `tracehouse build` record builds in.
telemetry:
  enabled: false
event_log_storage:
  module: pipelines.run_history
  class: WarehouseEventLogStorage
  config:
    base_dir: {base_dir}
# No captured step output: on a Dask worker, Dagster's default capture starts two `tail -F`
# processes a step, which outlived their worker (and held the build's stderr open) when the
# cluster stopped it; the build says its progress itself.
compute_logs:
  module: dagster._core.storage.noop_compute_log_manager
  class: NoOpComputeLogManager
"""


class WarehouseEventLogStorage(ConsolidatedSqliteEventLogStorage):
    """Dagster's one-file SQLite event log, keeping one pool of connections per process (the parent
    class makes a new engine, and a new connection, for every event it stores)."""

    _engine = None

    def __init__(self, base_dir: str, inst_data: Any = None) -> None:
        self._batch = threading.local()  # the connection of a :meth:`batch` open on this thread (set first:
        super().__init__(base_dir, inst_data)  # a new event log's tables are made here, through _connect)

    @contextmanager
    def _connect(self) -> Iterator:
        import sqlalchemy

        batched = getattr(self._batch, "conn", None)
        if batched is not None:
            yield batched
            return
        if self._engine is None:
            self._engine = sqlalchemy.create_engine(
                self._conn_string, connect_args={"timeout": 30, "check_same_thread": False}
            )
        with self._engine.connect() as conn, conn.begin():
            yield conn

    _asset_checks_table = False

    @property
    def supports_asset_checks(self) -> bool:
        """Dagster asks before it stores each check result, by listing the database's tables: 6 ms a
        check, 0.26 s of a build's 43. A table that is there stays there: the answer yes is kept."""
        if not self._asset_checks_table:
            self._asset_checks_table = super().supports_asset_checks
        return self._asset_checks_table

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Store every event of this thread meanwhile in one transaction: a build's ~150 events cost
        one commit (and its fsync), not one each (4.7 ms an event on this VM's disk)."""
        with self._connect() as conn:
            self._batch.conn = conn
            try:
                yield
            finally:
                self._batch.conn = None

class UnkeptEventLogStorage(InMemoryEventLogStorage):
    """Dagster's in-memory event log, minus the log: events reach the run's watchers (the run storage
    still follows each run's status) but are not stored. Dynamic partitions are kept as before, and
    answered from memory."""

    def __init__(self) -> None:
        # InMemoryEventLogStorage.__init__ without stamping its new tables with alembic's revision:
        # alembic loads every migration script of the event log for that, 0.28 s of each build
        # process (py-spy), for a database that lives as long as the process and is never migrated.
        from dagster._core.storage.event_log.schema import SqlEventLogStorageMetadata

        self._inst_data = None
        self._engine = _in_memory_engine("events")
        self._handlers = defaultdict(set)
        self._storage_id = 0
        self._db_lock = threading.Lock()
        self._held_conn = self._engine.connect()  # the in-memory database lives while one connection does
        with self._held_conn.begin():
            SqlEventLogStorageMetadata.create_all(self._held_conn)
        self._partitions: dict[str, dict[str, None]] = {}  # definition -> its keys, in the order added

    def store_event(self, event: Any) -> None:
        self._storage_id += 1
        cursor = str(EventLogCursor.from_storage_id(self._storage_id))
        for handler in list(self._handlers[event.run_id]):
            handler(event, cursor)

    # Nothing is stored, so no asset has a record, a materialization or an observation. Dagster still
    # asks before every step (the data versions of the step's inputs): answered here without a query
    # of the empty SQLite tables, ~0.3 s of a 32-graph build's 5 runs (py-spy).
    def get_asset_records(self, asset_keys: Any = None) -> list:
        return []

    def fetch_materializations(self, records_filter: Any, limit: int, cursor: str | None = None,
                               ascending: bool = False) -> EventRecordsResult:
        return _no_records(cursor)

    def fetch_observations(self, records_filter: Any, limit: int, cursor: str | None = None,
                           ascending: bool = False) -> EventRecordsResult:
        return _no_records(cursor)


    # Dynamic partitions are written to the SQLite table as before, and also kept in a dict that
    # answers the questions: Dagster asks whether the run's partition exists for each output of a
    # step (8 a flattening run), 0.27 s of a 32-graph build's queries (py-spy).
    def add_dynamic_partitions(self, partitions_def_name: str, partition_keys: Any) -> None:
        super().add_dynamic_partitions(partitions_def_name, partition_keys)
        known = self._partitions.setdefault(partitions_def_name, {})
        for key in partition_keys:
            known.setdefault(key, None)

    def delete_dynamic_partition(self, partitions_def_name: str, partition_key: str) -> None:
        super().delete_dynamic_partition(partitions_def_name, partition_key)
        self._partitions.get(partitions_def_name, {}).pop(partition_key, None)

    def get_dynamic_partitions(self, partitions_def_name: str) -> list[str]:
        return list(self._partitions.get(partitions_def_name, {}))

    def has_dynamic_partition(self, partitions_def_name: str, partition_key: str) -> bool:
        return partition_key in self._partitions.get(partitions_def_name, {})

    def get_existing_dynamic_partitions(self, partitions_def_name: str, partition_keys: Any) -> set[str]:
        known = self._partitions.get(partitions_def_name, {})
        return {key for key in partition_keys if key in known}


def _no_records(cursor: str | None) -> EventRecordsResult:
    """What Dagster's SQL event log answers when no record matches (the cursor given, else before all)."""
    return EventRecordsResult([], cursor=cursor or EventLogCursor.from_storage_id(-1).to_string(), has_more=False)


class UnstampedRunStorage(InMemoryRunStorage):
    """Dagster's in-memory run storage, its tables made without alembic's revision stamp (see
    :class:`UnkeptEventLogStorage`)."""

    def __init__(self) -> None:
        from dagster._core.storage.runs.schema import InstanceInfo, RunStorageSqlMetadata

        self._engine = _in_memory_engine("runs")
        self._held_conn = self._engine.connect()
        with self._held_conn.begin():
            RunStorageSqlMetadata.create_all(self._held_conn)
            InstanceInfo.create(self._held_conn, checkfirst=True)  # in the metadata already, as of Dagster 1.13
        self._snapshots: dict[str, Any] = {}

    # The job and execution plan snapshots of each run, kept as the objects they are: Dagster's SQL
    # storage serialized and compressed each into its in-memory database (and read it back), ~0.07 s
    # of a build's 5-7 runs (py-spy), in a database that lives as long as the process. The row is
    # still written, empty, for the runs table's foreign key.
    def _add_snapshot(self, snapshot_id: str, snapshot_obj: Any, snapshot_type: Any) -> str:
        from dagster._core.storage.runs.schema import SnapshotsTable

        if snapshot_id not in self._snapshots:
            with self.connect() as conn:
                conn.execute(SnapshotsTable.insert().values(snapshot_id=snapshot_id, snapshot_body=b"",
                                                            snapshot_type=snapshot_type.value))
            self._snapshots[snapshot_id] = snapshot_obj
        return snapshot_id

    def _has_snapshot_id(self, snapshot_id: str) -> bool:
        return snapshot_id in self._snapshots

    def _get_snapshot(self, snapshot_id: str) -> Any:
        return self._snapshots.get(snapshot_id)


def _in_memory_engine(kind: str) -> Any:
    """An engine on a new in-memory SQLite database, as Dagster's in-memory storages make theirs."""
    from dagster._core.storage.sql import create_engine
    from dagster._core.storage.sqlite import create_in_memory_conn_string
    from sqlalchemy.pool import NullPool

    return create_engine(create_in_memory_conn_string(f"{kind}-{uuid.uuid4()}"), poolclass=NullPool)


def _in_process_instance(event_storage: Any, home: Path | None = None) -> dg.DagsterInstance:
    """An instance that runs in this process and keeps its runs in memory, with ``event_storage``;
    its artifacts in ``home``, else (ephemeral, as ``DagsterInstance.ephemeral()``) in a temporary
    folder."""
    from dagster._core.instance import InstanceType
    from dagster._core.launcher.sync_in_memory_run_launcher import SyncInMemoryRunLauncher
    from dagster._core.run_coordinator import DefaultRunCoordinator
    from dagster._core.storage.noop_compute_log_manager import NoOpComputeLogManager
    from dagster._core.storage.root import LocalArtifactStorage, TemporaryLocalArtifactStorage

    return dg.DagsterInstance(
        instance_type=InstanceType.EPHEMERAL if home is None else InstanceType.PERSISTENT,
        local_artifact_storage=TemporaryLocalArtifactStorage() if home is None else LocalArtifactStorage(str(home)),
        run_storage=UnstampedRunStorage(),
        event_storage=event_storage,
        compute_log_manager=NoOpComputeLogManager(),
        run_coordinator=DefaultRunCoordinator(),
        run_launcher=SyncInMemoryRunLauncher(),
    )


def build_instance() -> dg.DagsterInstance:
    """An ephemeral instance whose event log keeps nothing: what ``tracehouse build`` and ``watch``
    run their steps on (a watcher's instance lives for days)."""
    return _in_process_instance(UnkeptEventLogStorage())


_INSTANCES: dict[str, dg.DagsterInstance] = {}
_HISTORIES: dict[str, dg.DagsterInstance] = {}
_LOCK = threading.Lock()


def _config_is_ours(home: Path) -> bool:
    """Write the instance's dagster.yaml when it is missing or an older one of ours; True when the
    file is ours (a user's own, say with PostgreSQL storages, is left as it is)."""
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    written = config.read_text() if config.exists() else None
    if written is None or (written.startswith("# Written by tracehouse") and "compute_logs:" not in written):
        config.write_text(DAGSTER_YAML.format(base_dir=home / "history"))  # new, or ours of before
        return True
    return written.startswith("# Written by tracehouse")


def instance_for(warehouse: Warehouse) -> dg.DagsterInstance:
    """The warehouse's Dagster instance (created with its dagster.yaml on first use; one per process)."""
    from dagster._core.instance.ref import InstanceRef

    home = warehouse.dagster_home
    with _LOCK:
        if str(home) not in _INSTANCES:
            _config_is_ours(home)
            _INSTANCES[str(home)] = dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home)))
        return _INSTANCES[str(home)]


def history_for(warehouse: Warehouse) -> dg.DagsterInstance:
    """What a build records itself in: the warehouse instance's own event log (its runless events and
    dynamic partitions are what ``tracehouse ui`` shows of a build), without the run and schedule
    storages, which a build does not write. Opening those too cost the build process 0.35 s, 0.7 s
    on a fresh warehouse (they are created then); the UI creates them when it first opens the
    instance. With a dagster.yaml of the user's own, or the whole instance open already, that
    instance."""
    home = warehouse.dagster_home
    with _LOCK:
        instance = _INSTANCES.get(str(home)) or _HISTORIES.get(str(home))
        if instance is None and _config_is_ours(home):
            instance = _HISTORIES[str(home)] = _in_process_instance(
                WarehouseEventLogStorage(str(home / "history")), home)
    return instance or instance_for(warehouse)


def record_build(
    warehouse: Warehouse,
    record: BuildRecord,
    rebuilt: list[str],
    removed: list[str],
    events: list[dg.AssetMaterialization | dg.AssetCheckEvaluation],
) -> float:
    """Write one committed build into the warehouse's instance; returns the seconds it took.
    ``rebuilt``: partitions whose generation is new in this build; ``events``: the materializations
    (not of the tables) and check results of its final run."""
    started = time.monotonic()
    instance = history_for(warehouse)
    storage = instance.event_log_storage
    with storage.batch() if isinstance(storage, WarehouseEventLogStorage) else contextlib.nullcontext():
        _record(warehouse, instance, record, rebuilt, removed, events)
    return time.monotonic() - started


def _record(warehouse: Warehouse, instance: dg.DagsterInstance, record: BuildRecord, rebuilt: list[str],
            removed: list[str], events: list[dg.AssetMaterialization | dg.AssetCheckEvaluation]) -> None:
    tag = {BUILD_TAG: record.build}
    known = set(instance.get_dynamic_partitions(PARTITIONS))
    new = [key for key in record.snapshot.partitions if key not in known]
    if new:
        instance.add_dynamic_partitions(PARTITIONS, new)
    for key in removed:
        if key in known:
            instance.delete_dynamic_partition(PARTITIONS, key)
    for key in rebuilt:
        part = record.snapshot.partitions[key]
        manifest = manifest_of(warehouse, part.generation) or {"files": []}
        for table in schema.TABLES:
            if table == "ingest_errors":
                rows = sum(len(entry["errors"]) for entry in manifest["files"])
            else:
                rows = sum(entry["rows"][table] for entry in manifest["files"])
            instance.report_runless_asset_event(dg.AssetMaterialization(
                asset_key=table, partition=key,
                metadata={**tag, "rows": rows, "dagster/row_count": rows, "generation": Path(part.generation).name},
            ))
    for event in events:
        if isinstance(event, dg.AssetMaterialization):
            event = dg.AssetMaterialization(asset_key=event.asset_key, partition=event.partition,
                                            description=event.description, metadata={**event.metadata, **tag})
        instance.report_runless_asset_event(event)
