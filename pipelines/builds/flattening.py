"""The flattening a build's Dagster run does: the build's plan (pipelines.builds.plan.plan_splits) carried
out with the one function that flattens a split on this machine (pipelines.builds.ingest.ingest_partition),
then the inputs digest and the counts the commit records.

A run started by ``tracehouse build`` is lent what the build process already holds (:func:`lend`):
the listing it took once, the Great Expectations prevalidation that validates each new generation
on the other core, the generations a Dask fan-out wrote ahead, and where progress lines go. A run
Dagster started itself (UI, sensor, schedule, ``dagster job execute``) lists its sources and plans
alone. Either way the run, not its caller, writes the tables.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pipelines.analytics import crosswalk
from pipelines.builds.ingest import StrictIngestError, ingest_partition
from pipelines.builds.plan import (
    PartitionFiles,
    Plan,
    discover,
    emptied_message,
    emptied_sources,
    generation_state,
    in_order,
    manifest_of,
    plan_splits,
)
from pipelines.config import Source, SourceUnavailable
from pipelines.progress import FileProgress, event
from pipelines.readers.base import Cases
from pipelines.storage.records import PartitionState, Snapshot
from pipelines.storage.state import Attempt, CommitLog, inputs_digest
from pipelines.storage.warehouse import Warehouse

# While a split holding a file of at least this many bytes is flattened, the Great Expectations
# worker (validation_worker.Prevalidation, a process holding GX) is not started: its memory would
# stack on the flattening's peak, and for such a file the flattening outlasts the worker's start anyway
# (BENCHMARKS.md, large corpus).
HEAVY_FILE_BYTES = 128 << 20


class FlatteningFailed(RuntimeError):
    """A split could not be flattened (its message names the split and the error)."""


class StrictStop(RuntimeError):
    """--strict: input an earlier build rejected, still unchanged, is part of this build."""


def heavy_splits(listing: dict[str, PartitionFiles]) -> list[str]:
    """Keys of the splits holding a file of at least HEAVY_FILE_BYTES, in the order a build decides them."""
    return [key for key in in_order(listing) if any(f.size >= HEAVY_FILE_BYTES for f in listing[key].files)]


@dataclass
class Lent:
    """What a build process lends the run it starts (see the module's docstring)."""

    listing: dict[str, PartitionFiles]
    say: Callable[[str], None]
    prevalidation: object | None = None  # validation_worker.Prevalidation
    fanned: dict[str, str] = field(default_factory=dict)
    removed_on_request: frozenset[str] = frozenset()


_LENT = threading.local()  # in-process Dagster runs execute their steps on the thread that started them


@contextmanager
def lend(attempt: Attempt, lent: Lent) -> Iterator[None]:
    """Lend ``lent`` to the in-process run of ``attempt`` started inside this block."""
    outer = getattr(_LENT, "value", None)
    _LENT.value = (attempt.id, lent)
    try:
        yield
    finally:
        _LENT.value = outer


def lent_to(attempt_id: str) -> Lent | None:
    value = getattr(_LENT, "value", None)
    return value[1] if value and value[0] == attempt_id else None


def list_sources(warehouse: Warehouse, sources: list[Source], say: Callable[[str], None] = lambda _: None,
                 committed: dict[str, PartitionState] | None = None,
                 build: int | None = None) -> dict[str, PartitionFiles]:
    """List the sources' files now (making the sample corpus first if it is a source and missing).
    Given the ``committed`` splits (of ``build``), refuse (SourceUnavailable) a source that lists no
    files although they hold rows of it (pipelines.builds.plan.emptied_sources)."""
    if any(s.path in (warehouse.corpus_dir, warehouse.sample_predictions_dir)
           or s.path.parent == warehouse.sample_predictions_dir for s in sources):
        from pipelines.sample.ensure import ensure_sample_corpus

        if not warehouse.corpus_dir.is_dir():
            from pipelines.sample.archive import ARCHIVE

            how = "unpacking the shipped" if ARCHIVE.is_file() else "generating the"
            say(event("sample_corpus", how=how, path=warehouse.corpus_dir))
        ensure_sample_corpus(warehouse, say)
    listing = discover(sources)
    for name, keys in emptied_sources(sources, listing, committed or {}).items():
        source = next(s for s in sources if s.name == name)
        raise SourceUnavailable(emptied_message(source, keys, build))
    return listing


def build_inputs(code: str, sources: list[dict[str, str]], snapshot: Snapshot, pictures: str,
                 crosswalk: str = "") -> str:
    """The inputs digest of a build whose snapshot is decided: a build whose inputs equal the last
    committed build's has nothing to do. Pictures asked for are part of what a build makes, and the
    warehouse's team crosswalk (``crosswalk``: pipelines.analytics.crosswalk.digest) what its marts map labels by."""
    code = code if pictures == "none" else f"{code}+pictures={pictures}"
    code = f"{code}+crosswalk={crosswalk}" if crosswalk else code
    fingerprints = {key: part.fingerprint for key, part in snapshot.partitions.items()}
    return inputs_digest(code, sources, fingerprints)


def committed_partitions(warehouse: Warehouse, attempt: Attempt) -> dict[str, PartitionState]:
    return CommitLog(warehouse).get(attempt.parent).snapshot.partitions if attempt.parent else {}


def flatten_splits(
    warehouse: Warehouse,
    attempt: Attempt,
    lent: Lent,
    *,
    full: bool,
    strict: bool,
    pictures: str,
    progress: bool,
) -> Plan:
    """Carry out the build's plan for ``attempt``: every listed split kept, adopted or flattened,
    its snapshot, inputs digest and counts saved. Raises FlatteningFailed, StrictIngestError or StrictStop (its
    message also kept as the attempt's ``flattening`` output, for the build's caller to say)."""
    from pipelines.validation import worker as validation_worker

    say, listing, pre = lent.say, lent.listing, lent.prevalidation
    heavy_keys = frozenset(heavy_splits(listing))
    heavy = set(heavy_keys)  # the GX worker is held until these are decided (HEAVY_FILE_BYTES)
    if pre is not None:
        if heavy:
            pre.hold()
        if attempt.parent is None or full:  # it will flatten: Great Expectations loads on the other core meanwhile
            pre.start()
    report = FileProgress(progress)

    def flatten(part: PartitionFiles, claimed: dict[str, str], cases: Cases | None,
                previous: Path | None) -> PartitionState:
        if part.key in lent.fanned:
            say(event("partition_claims_moved", partition=part.key))
        if part.key in heavy_keys:  # no worker beside this split's flattening (HEAVY_FILE_BYTES)
            validation_worker.drop_early_worker()
        if pre is not None:
            pre.start()  # a rebuild's first changed split: GX loads on the other core while it is flattened
        say(event("partition_flattening", partition=part.key, files=len(part.files)))
        try:
            result = ingest_partition(warehouse, part.key, part.source.kind, part.files, previous=previous,
                                      claimed=claimed, cases=cases, strict=strict, on_progress=report,
                                      options=part.source.option_values)
        except StrictIngestError:
            raise
        except Exception as exc:
            raise FlatteningFailed(f"partition {part.key}: flattening failed: {type(exc).__name__}: {exc}") from exc
        return generation_state(warehouse, part, result.generation)

    def decided(key: str, action: str) -> None:
        if action == "removed":
            source = attempt.snapshot.partitions[key].source if key in attempt.snapshot.partitions else ""
            why = (f"source {source} removed on request" if source in lent.removed_on_request
                   else f"its files were deleted from source {source}")
            say(event("partition_removed", partition=key, why=why))
            return
        if action == "adopt":
            say(event("partition_adopted", partition=key))
        if action == "built" and pre is not None:
            pre.submit(attempt.snapshot.partitions[key])  # GX on the other core, while we go on
        heavy.discard(key)
        if pre is not None and not heavy:
            pre.release()

    try:
        plan = plan_splits(warehouse, listing, attempt.snapshot, committed_partitions(warehouse, attempt),
                           full=full, flatten=flatten, fanned=lent.fanned, decided=decided)
        if pre is not None:
            pre.release()
        if strict and (rejected := rejected_inputs(warehouse, attempt.snapshot)):
            raise StrictStop(carried_over(rejected))
    except (FlatteningFailed, StrictIngestError, StrictStop) as exc:
        attempt.put_output("flattening", {"stopped": str(exc), "strict": not isinstance(exc, FlatteningFailed)})
        raise
    attempt.inputs = build_inputs(attempt.code, attempt.sources, attempt.snapshot, pictures,
                                  crosswalk.digest(warehouse.root))
    attempt.summary = {
        "files_found": sum(len(p.files) for p in listing.values()),
        "partitions_built": plan.keys("built"),
        "partitions_adopted": plan.keys("adopt"),
        "partitions_unchanged": plan.keys("keep"),
        "partitions_removed": plan.removed,
    }
    attempt.save()
    return plan


def rejected_inputs(warehouse: Warehouse, snapshot: Snapshot) -> list[dict]:
    """The rejected files and records (ingest_errors' rows with rejected true) of a snapshot's
    partitions, from their manifests: rejected by this build or carried over from an earlier one
    whose generation a partition keeps (its files unchanged)."""
    rejected = []
    for key in sorted(snapshot.partitions):
        manifest = manifest_of(warehouse, snapshot.partitions[key].generation) or {}
        rejected += [error for entry in manifest.get("files", []) for error in entry["errors"] if error["rejected"]]
    return rejected


def carried_over(rejected: list[dict]) -> str:
    """--strict on input an earlier build rejected: the first such file, why, and how many more."""
    first = rejected[0]
    at = f" at {first['position']}" if first.get("position") else ""
    more = len(rejected) - 1
    others = f"; and {more} more rejected (tracehouse sql \"select * from ingest_errors\")" if more else ""
    return (f"{first['source']}/{first['file']}: {first['kind']}: {first['reason']}{at} (rejected when an earlier "
            f"build read it; unchanged since){others}")
