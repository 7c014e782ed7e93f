"""The fan-out job: one Dagster step per source split to flatten, run by ``dagster_dask``'s executor on
worker processes (``tracehouse build --executor dask``; the build's orchestration is pipelines.interfaces.fanout).

Why a job made per build instead of one op with ``DynamicOut``: dagster-dask submits the steps of
the execution plan as it stands before the run starts, and mapped steps are only resolved while
it runs, so it silently skips them (a DynamicOut fan-out on ``dask_executor`` runs the fanning step
and reports success with no mapped step run). The job is therefore built from the list of keys by
:func:`fanout_job`, a module-level function every worker calls again with the same arguments
(:func:`reconstructable_fanout`, ``dg.build_reconstructable_job``); the warehouse, sources and attempt
reach the workers as the resource's run config.

A step that wrote its generation says so at once on the Dask cluster's structured event log (a topic
the build subscribes to, ``distributed.get_worker().log_event``): Dagster's public API gives the run's
step events only when ``execute_job`` returns, and the build shows each partition as it finishes
(and, on object storage, downloads it meanwhile).

Each step writes a complete generation exactly as the ``flattened_tables`` asset does (the same
``ingest_partition``, with the graph ids the attempt's partitions before it claimed); nothing is
decided here: the build run's flattening step adopts the generation only if its claims still hold.

(No ``from __future__ import annotations``: Dagster reads the op's config class from its annotation.)
"""

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from pipelines.builds.plan import PartitionFiles
from pipelines.defs.resources import TracehouseResource
from pipelines.storage.warehouse import Warehouse

JOB_NAME = "flatten_partitions"


class FlattenConfig(dg.Config):
    """The partition a step flattens, and its source (only that source's files are listed). For a
    warehouse on object storage, also what a worker sharing no filesystem with the build needs."""

    key: str
    source: str
    fragments: bool = True  # also compute the per-partition mart fragments of the new generation
    store: str = ""  # the warehouse's s3:// URL: the step works in its own copy and uploads what it writes
    endpoint: str = ""  # the store's endpoint and region ([storage]; empty: the AWS variables)
    region: str = ""
    kind: str = ""  # store: the source's kind and URL, and the partition's files (keys under that URL)
    source_url: str = ""
    source_options: str = ""  # store: the reader options the source sets, as JSON (pipelines.config.Source.options)
    files: list[str] = []
    generations: dict[str, str] = {}  # store: key -> generation of the partitions whose graph ids come first
    previous: str = ""  # store: the generation whose unchanged files' rows are copied ("" for none)
    progress_topic: str = ""  # the Dask event topic the build listens on for finished steps ("" for none)


@dg.op(out=dg.Out(dg.Nothing))
def flatten_partition(
    context: dg.OpExecutionContext, config: FlattenConfig, tracehouse: TracehouseResource
) -> Iterator[dg.Output]:
    """Flatten one source split into a new, complete generation (not adopted, not committed: the
    build decides), then compute its per-partition mart fragments; on object storage, upload them."""
    import time

    from pipelines.analytics.marts import build_fragments
    from pipelines.builds.ingest import ingest_partition
    from pipelines.builds.plan import generation_state
    from pipelines.storage import remote

    started = time.monotonic()
    split = _split_on_store(config, tracehouse) if config.store else _split_here(config, tracehouse)
    warehouse, part = split.warehouse, split.part
    result = ingest_partition(warehouse, config.key, part.source.kind, part.files, previous=split.previous,
                              claimed=split.claimed, strict=tracehouse.strict, options=part.source.option_values)
    fragments = []
    if config.fragments:
        fragments = [warehouse.rel(f) for f in build_fragments(warehouse, generation_state(warehouse, part,
                                                                                          result.generation))]
    metadata = {
        "partition": config.key,
        "generation": warehouse.rel(result.generation),
        "files": result.files,
        "files_parsed": result.parsed,
        "ingest_errors": len(result.errors),
        "rows": sum(result.rows.values()),
        "fragments": len(fragments),
    }
    if config.store:
        uploaded = remote.upload(warehouse.root, [warehouse.rel(result.generation), *fragments])
        metadata |= {"fragment_files": ",".join(fragments), "downloaded": split.downloaded, "uploaded": uploaded}
        context.log.info(f"{config.key}: {split.downloaded} source objects downloaded, {result.files} files "
                         f"flattened, {uploaded} files uploaded to {config.store}")
    else:
        context.log.info(f"{config.key}: {result.files} files ({result.parsed} parsed, {result.reused} reused), "
                         f"{len(result.errors)} ingest errors, {result.seconds:.2f} s")
    metadata["seconds"] = round(time.monotonic() - started, 3)
    yield dg.Output(None, metadata=metadata)
    announce(config.progress_topic, metadata)  # resumed once Dagster has recorded the output


@dataclass
class StepSplit:
    """What a step flattens: in which working copy, the split's files, the generation whose unchanged
    files' rows are copied, and the graph ids the splits before it claimed."""

    warehouse: Warehouse
    part: PartitionFiles
    previous: Path | None
    claimed: dict[str, str]
    downloaded: int = 0


def _split_here(config: FlattenConfig, tracehouse: TracehouseResource) -> StepSplit:
    """A step on a worker sharing the build's filesystem: the split as listed now, claims as the
    attempt's snapshot holds them."""
    from pipelines.builds.plan import claimed_before, discover, previous_generation
    from pipelines.storage.state import Attempt

    warehouse = tracehouse.wh
    sources = [s for s in tracehouse.resolved_sources() if s.name == config.source]
    part = discover(sources).get(config.key)
    if part is None:
        raise dg.Failure(f"partition {config.key} has no input files in source {config.source!r} any more")
    snapshot = Attempt.load(warehouse, tracehouse.attempt).snapshot
    previous = None if tracehouse.full else previous_generation(warehouse, config.key)
    return StepSplit(warehouse, part, previous, claimed_before(warehouse, snapshot, config.key))


def _split_on_store(config: FlattenConfig, tracehouse: TracehouseResource) -> StepSplit:
    """A step for a warehouse on object storage, on a worker that may share no filesystem with the
    build: in the worker's own working copy of the store (its $TRACEHOUSE_CACHE), take the manifests of
    the partitions before this one (their graph-id claims) and the generation to copy rows from, and
    mirror the partition's source objects (by ETag and size). Nothing is committed: the build
    downloads what it adopts."""
    from pipelines.builds.ingest import load_manifest, piece_paths
    from pipelines.builds.plan import claimed_by, discover
    from pipelines.builds.source_sync import sync_source
    from pipelines.config import make_source
    from pipelines.storage import remote

    options = remote.StoreOptions(config.endpoint or None, config.region or None)
    root = remote.local_copy(config.store, options)
    root.mkdir(parents=True, exist_ok=True)
    remote.bind(root, config.store, options)
    warehouse = Warehouse(root)
    before = {k: g for k, g in config.generations.items() if k < config.key}
    remote.fetch(root, [f"{g}/manifest.json" for g in before.values()] + ([config.previous] if config.previous else []))
    if config.previous:  # and the earlier generations its unchanged pieces lie in, to keep them by reference
        pieces = piece_paths(load_manifest(warehouse.path(config.previous)) or {})
        remote.fetch(root, sorted({piece.rsplit("/", 1)[0] for piece in pieces} - {config.previous}))
    source = make_source(config.source, config.kind, config.source_url, None, options,
                         json.loads(config.source_options) if config.source_options else None)
    synced = sync_source(source, options, only=config.files)
    part = discover([source]).get(config.key)
    if part is None:
        raise dg.Failure(f"partition {config.key} has no input files in source {config.source_url}")
    asked = set(config.files)
    part.files = [f for f in part.files if f.relpath in asked]  # the mirror may hold files of earlier syncs too
    previous = warehouse.path(config.previous) if config.previous and not tracehouse.full else None
    return StepSplit(warehouse, part, previous, claimed_by(warehouse, before, config.key), synced.downloaded)


def announce(topic: str, metadata: dict) -> None:
    """Tell the build at once that this step's generation is written (``metadata``: the step output's),
    as an event under ``topic`` on the Dask cluster the step runs on. Only a notice: the build counts
    the steps ``execute_job`` reports as succeeded."""
    if not topic:
        return
    from distributed import get_worker  # a fan-out step runs on a Dask worker

    get_worker().log_event(topic, metadata)


def node_name(index: int, key: str) -> str:
    """A step's name: its place in the submission order, then the key in Dagster's alphabet."""
    return f"flatten_{index:04d}_{re.sub(r'[^A-Za-z0-9_]', '_', key)}"


def fanout_job(keys: Sequence[str]) -> dg.JobDefinition:
    """One ``flatten_partition`` step per key, none depending on another, on the Dask executor.
    Called again on every worker (with the same keys) to reconstruct the job."""
    from dagster_dask import dask_executor  # only a build that asked for Dask imports it

    @dg.job(
        name=JOB_NAME,
        executor_def=dask_executor,
        resource_defs={
            "tracehouse": TracehouseResource.configure_at_launch(),
            "io_manager": dg.FilesystemIOManager(),  # steps in other processes: nothing in memory
        },
        tags={"tracehouse/cli": "build"},
        description="Flatten source splits in parallel on a Dask cluster (tracehouse build --executor dask); "
        "the build adopts each generation whose graph-id claims still hold, then commits.",
    )
    def flatten_partitions() -> None:
        for index, key in enumerate(keys):
            flatten_partition.alias(node_name(index, key))()

    return flatten_partitions


def reconstructable_fanout(keys: Sequence[str]):  # no return type: Dagster exports no name for it
    """The job as worker processes rebuild it: ``fanout_job(keys)`` imported by name (what
    ``dg.execute_job`` runs; Dagster's public API names no type for it)."""
    return dg.build_reconstructable_job(__name__, fanout_job.__name__, reconstructable_args=(list(keys),))


def run_config(resource: TracehouseResource, steps: dict[str, dict], address: str, fragments: bool = True,
               progress_topic: str = "") -> dict:
    """The run config: each step's config (``steps``: key -> :class:`FlattenConfig` fields besides the
    key, at least ``source``, in submission order), the resource's fields, the Dask scheduler to
    submit to, and the Dask event topic the steps announce their generations on."""
    fields = {name: getattr(resource, name) for name in TracehouseResource.model_fields}
    return {
        "ops": {node_name(i, key): {"config": {"key": key, "fragments": fragments, "progress_topic": progress_topic,
                                               **step}}
                for i, (key, step) in enumerate(steps.items())},
        "resources": {"tracehouse": {"config": fields | {"progress": False}}},
        "execution": {"config": {"cluster": {"existing": {"address": address}}}},
        "loggers": {"console": {"config": {"log_level": "CRITICAL"}}},
    }
