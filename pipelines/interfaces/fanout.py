"""Optimistic parallel flattening for ``tracehouse build --executor dask``: before the build's run
decides its partitions one by one, every graph partition that will need a new generation is flattened at
once, one Dagster step each, on a Dask cluster (pipelines/defs/fanout.py).

Optimistic because graph ids are claimed first come first served in partition order: each step
flattens its split for the claims of the attempt's snapshot as it stands (the committed build's
partitions), not for the decisions the build has yet to make. The run's flattening step then
adopts a step's generation only when its claims still hold (pipelines.builds.plan.fitting) and flattens
anything else again in-process, so the result is the in-process build's, row for row; the fan-out
only decides how soon. For the same reason any failure here (a step, a lost worker, the run) costs
time, never the build: what the fan-out did not finish is flattened in-process afterwards.

Prediction sources are left to the sequential pass: they are matched against the annotations of
the graph partitions the build decides first.

Dask is imported here, and this module only when a build asked for Dask. A cluster tracehouse
starts (``distributed.LocalCluster``) lives only for the fan-out and is closed when it ends, on
error too; its worker processes exit with it (and with this process if it is killed).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines.builds.executors import ExecutorSettings
from pipelines.builds.plan import PartitionFiles, plan_splits
from pipelines.builds.step_errors import cause
from pipelines.defs.fanout import node_name, reconstructable_fanout, run_config
from pipelines.defs.resources import TracehouseResource
from pipelines.progress import event
from pipelines.readers import tier
from pipelines.storage import remote
from pipelines.storage.records import PartitionState, Snapshot
from pipelines.storage.state import Attempt
from pipelines.storage.warehouse import Warehouse

if TYPE_CHECKING:
    import dagster as dg

CONNECT_SECONDS = 10.0  # to reach an existing scheduler, and for its first worker to be there
WORKERS_SECONDS = 120.0  # for the workers of a cluster tracehouse started to come up


def to_flatten(
    warehouse: Warehouse,
    listing: dict[str, PartitionFiles],
    attempt: Attempt,
    committed: dict[str, PartitionState],
    full: bool,
) -> list[str]:
    """The graph partitions the build's dry plan says must be read, for the attempt's snapshot as it
    is, the largest first (so that the longest steps start first and the workers finish together)."""
    graphs = {key: part for key, part in listing.items() if tier(part.source.kind) == 0}
    plan = plan_splits(warehouse, graphs, Snapshot(dict(attempt.snapshot.partitions)), committed, full=full)
    return sorted(plan.keys("ingest"), key=lambda k: (-sum(f.size for f in listing[k].files), k))


def flatten_ahead(
    warehouse: Warehouse,
    resource: TracehouseResource,
    listing: dict[str, PartitionFiles],
    attempt: Attempt,
    committed: dict[str, PartitionState],
    executor: ExecutorSettings,
    *,
    full: bool,
    say: Callable[[str], None],
) -> dict[str, str]:
    """Flatten the partitions that need it on ``executor``'s cluster; returns partition key -> the
    generation (relative path) its step wrote, for the steps that succeeded."""
    keys = to_flatten(warehouse, listing, attempt, committed, full)
    if not keys:
        return {}
    attempt.save()  # the steps read the claims of the snapshot as it is
    steps = {key: step_config(warehouse, listing[key], attempt, committed.get(key), full) for key in keys}
    shared = not all(step.get("store") for step in steps.values())  # a step that reads the build's own files
    with dask_cluster(executor, warehouse, say, shared=shared) as address:
        started = time.monotonic()
        say(event("fanout_started", partitions=len(keys), files=sum(len(listing[k].files) for k in keys)))
        written = run_fanout(warehouse, resource, steps, address, say, executor.dagster_home)
        left = len(keys) - len(written)
        rest = f"; {left} left to flatten here" if left else ""
        say(event("fanout_done", partitions=len(written), seconds=time.monotonic() - started, rest=rest))
    return written


def step_config(warehouse: Warehouse, part: PartitionFiles, attempt: Attempt, committed: PartitionState | None,
                full: bool) -> dict:
    """What a step is told besides its key: its source; for a warehouse and source on object storage
    also the store, the source's URL and the partition's files, the generations whose graph ids come
    first and the committed generation (``committed``, on the store) to copy unchanged rows from,
    since its worker may share no filesystem with us."""
    step: dict = {"source": part.source.name}
    bound = remote.binding(warehouse.root)
    url = next((e.get("url") for e in attempt.sources if e["name"] == part.source.name), None)
    if bound is None or not url:
        return step
    return step | {
        "store": bound["url"], "endpoint": bound.get("endpoint") or "", "region": bound.get("region") or "",
        "kind": part.source.kind, "source_url": url, "source_options": json.dumps(part.source.option_values),
        "files": [f.relpath for f in part.files],
        "generations": {k: state.generation for k, state in attempt.snapshot.partitions.items() if k < part.key},
        "previous": committed.generation if committed is not None and not full else "",
    }


def run_fanout(
    warehouse: Warehouse,
    resource: TracehouseResource,
    steps: dict[str, dict],
    address: str,
    say: Callable[[str], None],
    dagster_home: Path | None = None,
) -> dict[str, str]:
    """One run of the fan-out job (``dg.execute_job``) on the scheduler at ``address``, recorded in the
    warehouse's Dagster instance, or the one in ``dagster_home`` (``[executor] dagster_home``: one every
    worker reaches, e.g. on PostgreSQL; the executor needs a persistent one: the steps run in other
    processes). ``steps``: partition key -> its step's config (:func:`step_config`), in submission order.
    A line per partition as it finishes, from the notice its step logs on the cluster's event log once
    Dagster recorded its output (``execute_job`` reports the run's events only when it ends; those then
    settle the outputs whose notice did not arrive, and the failures). For a warehouse on object
    storage, the generations and mart fragments the workers uploaded are downloaded into this working
    copy."""
    import dagster as dg
    from distributed import Client

    from pipelines.builds.run_history import instance_for

    keys = list(steps)
    by_step = {node_name(i, key): key for i, key in enumerate(keys)}
    topic = f"tracehouse-fanout-{uuid.uuid4().hex}"
    progress = _Progress(warehouse, steps, say)
    try:
        with contextlib.ExitStack() as stack:
            instance = (stack.enter_context(instance_at(dagster_home)) if dagster_home is not None
                        else instance_for(warehouse))
            client = stack.enter_context(Client(address, timeout=CONNECT_SECONDS))
            notices: queue.Queue[dict | None] = queue.Queue()
            client.subscribe_topic(topic, lambda event: notices.put(event[1]))  # (time, msg) on Dask's loop
            reporter = threading.Thread(target=progress.follow, args=(notices,), name="fanout-progress", daemon=True)
            reporter.start()
            try:
                result = dg.execute_job(
                    reconstructable_fanout(keys), instance=instance,
                    run_config=run_config(resource, steps, address, progress_topic=topic),
                    tags={"tracehouse/cli": "build", "tracehouse/attempt": resource.attempt},
                )
            finally:
                client.unsubscribe_topic(topic)
                notices.put(None)
                reporter.join()
        progress.settle(result.all_events, by_step)
    except Exception as exc:  # noqa: BLE001 - the fan-out only saves time: the build flattens the rest itself
        say(f"the fan-out stopped ({type(exc).__name__}: {exc}); what it did not finish is flattened here")
    return progress.ready


@contextmanager
def instance_at(dagster_home: Path) -> Iterator[dg.DagsterInstance]:
    """The Dagster instance configured in ``dagster_home``'s dagster.yaml, opened the documented way
    (``DagsterInstance.get()`` reads ``$DAGSTER_HOME``, set for that call only), closed when the block
    ends."""
    import dagster as dg

    with _DAGSTER_HOME_LOCK:
        before = os.environ.get("DAGSTER_HOME")
        os.environ["DAGSTER_HOME"] = str(Path(dagster_home).resolve())
        try:
            instance = dg.DagsterInstance.get()
        finally:
            if before is None:
                del os.environ["DAGSTER_HOME"]
            else:
                os.environ["DAGSTER_HOME"] = before
    with instance:
        yield instance


_DAGSTER_HOME_LOCK = threading.Lock()


class _Progress:
    """The partitions the fan-out's steps flattened: said (and, on object storage, downloaded) as each
    step's notice arrives, then reconciled with what the run reported."""

    def __init__(self, warehouse: Warehouse, steps: dict[str, dict], say: Callable[[str], None]) -> None:
        self.warehouse, self.steps, self.say = warehouse, steps, say
        self.ready: dict[str, str] = {}  # key -> the generation its step wrote (on the store: downloaded)
        self.lost: set[str] = set()  # steps whose generation could not be downloaded: flattened here

    def follow(self, notices: queue.Queue) -> None:
        """Take the steps' notices until ``None``."""
        while (meta := notices.get()) is not None:
            if meta.get("partition") in self.steps:
                self.take(meta)

    def take(self, meta: dict) -> None:
        """One step's generation, written: into this working copy if it is on the store, then said."""
        key = str(meta["partition"])
        if key in self.ready or key in self.lost:
            return
        generation = str(meta["generation"])
        if self.steps[key].get("store"):  # on the store: into this working copy, whole, before it counts
            fragments = [f for f in str(meta.get("fragment_files") or "").split(",") if f]
            try:
                remote.fetch(self.warehouse.root, [generation, *fragments])
                remote.note_on_store(self.warehouse.root, [generation, *fragments])
            except Exception as exc:  # noqa: BLE001 - a download that failed costs time: flattened here
                self.lost.add(key)
                self.say(f"downloading {key}'s generation failed ({type(exc).__name__}: {exc}); it is flattened here")
                return
        self.ready[key] = generation
        self.say(event("partition_flattened_on_worker", partition=key, done=len(self.ready), steps=len(self.steps),
                       files=meta["files"], files_parsed=meta["files_parsed"], rows=meta["rows"],
                       seconds=float(meta["seconds"])))

    def settle(self, events: list, by_step: dict[str, str]) -> None:
        """Take what the run reports when it ends: a step's output whose notice did not arrive (the
        notice is only the early word), and the failures, said with their cause."""
        import dagster as dg

        for dagster_event in events:
            key = by_step.get(dagster_event.step_key or "")
            if dagster_event.is_successful_output and key is not None:
                self.take({name: value.value for name, value in dagster_event.event_specific_data.metadata.items()})
            elif dagster_event.is_step_failure and key is not None:
                self.say(f"flattening {key} failed on the cluster ({cause(dagster_event.event_specific_data.error)}); "
                         "it is flattened here")
            elif dagster_event.event_type == dg.DagsterEventType.RUN_FAILURE:
                error = getattr(dagster_event.event_specific_data, "error", None)
                self.say(f"the fan-out run failed ({cause(error)}); what it did not finish is flattened here")


@contextmanager
def dask_cluster(executor: ExecutorSettings, warehouse: Warehouse, say: Callable[[str], None],
                 shared: bool = True) -> Iterator[str]:
    """The address of the scheduler the fan-out submits to: ``executor.scheduler``, or a
    ``LocalCluster`` of ``executor.workers`` single-threaded worker processes started here and closed
    when the block ends (on error too). With ``shared`` (a local warehouse) checks first that the
    workers see the warehouse folder: a remote cluster's workers must then share its filesystem, or
    every step would fail; a warehouse on object storage needs only the store."""
    from distributed import Client, LocalCluster

    if executor.scheduler:
        say(f"connecting to the Dask scheduler at {executor.scheduler}")
        try:
            client = Client(executor.scheduler, timeout=CONNECT_SECONDS)
            client.wait_for_workers(1, timeout=CONNECT_SECONDS)
        except (OSError, TimeoutError) as exc:
            raise RuntimeError(f"cannot use the Dask scheduler at {executor.scheduler}: {exc}") from None
        with client:
            _check_workers(client, warehouse, shared)
            say(f"Dask scheduler {executor.scheduler}: {len(client.scheduler_info()['workers'])} workers")
            yield executor.scheduler
        return
    started = time.monotonic()
    say(event("cluster_starting", workers=executor.workers))
    cluster = LocalCluster(
        n_workers=executor.workers,
        processes=True,
        threads_per_worker=1,  # Dagster's steps are not thread-safe (dagster-dask says so too)
        host="127.0.0.1",  # this machine only
        dashboard_address=None,
        silence_logs=logging.ERROR,
        memory_limit=0,  # an ingest bounds its own memory; Dask's limits are for the data Dask holds
    )
    try:
        with Client(cluster) as client:
            client.wait_for_workers(executor.workers, timeout=WORKERS_SECONDS)
            _check_workers(client, warehouse, shared)
            say(event("cluster_up", address=cluster.scheduler_address, workers=executor.workers,
                      seconds=time.monotonic() - started))
            yield cluster.scheduler_address
    finally:
        say(event("cluster_stopping"))
        cluster.close()


def _check_workers(client, warehouse: Warehouse, shared: bool = True) -> None:
    """Refuse workers that could not run a step (a step a worker cannot even unpickle never ends):
    each must have tracehouse and dagster-dask importable and, with ``shared``, see the warehouse folder."""
    root = str(warehouse.root) if shared else ""

    def ready() -> list[str]:  # pickled by value: runs on a worker without importing tracehouse
        import importlib.util
        import os

        missing = [name for name in ("pipelines", "dagster_dask") if importlib.util.find_spec(name) is None]
        return missing + ([] if not root or os.path.isdir(root) else [f"the warehouse folder {root}"])

    for worker, missing in client.run(ready).items():
        if missing:
            raise RuntimeError(f"Dask worker {worker} lacks {', '.join(missing)}: the workers must run this "
                               "tracehouse (its venv) and, for a local warehouse, share the warehouse's and the "
                               "sources' filesystem")
