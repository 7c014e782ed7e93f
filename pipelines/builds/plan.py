"""What a build reads and which generation each partition takes: kept, adopted, or ingested anew.

A partition is one source split. Its generation can be *kept* when the committed one was built
from the same files (same fingerprint, pipelines.builds.changes); *adopted* when another complete
generation was (one a killed build or a Dagster run wrote and nobody committed); otherwise it is
*ingested*, taking over the unchanged pieces of the newest generation there is (pipelines.builds.ingest).

Graph ids are loaded once across the whole warehouse, first come first served in partition order
(partition key, then file path): a generation is only right for the graph ids that the partitions
before it claimed (``ingest.claims_hold``), so a change in one partition can send a later one,
whose files did not change, to be ingested again.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pipelines.builds.changes import files_fingerprint, partition_context
from pipelines.builds.ingest import claims_hold, load_manifest, loaded_graphs, piece_paths
from pipelines.config import Source
from pipelines.readers import reader_for, tier
from pipelines.readers.base import Cases, SourceFile
from pipelines.storage.records import MANIFEST, PartitionState, Snapshot
from pipelines.storage.warehouse import Warehouse, partition_key


@dataclass
class PartitionFiles:
    """The files of one source split: what one partition of the tables is built from."""

    key: str
    source: Source
    split: str
    files: list[SourceFile]


def discover(sources: list[Source]) -> dict[str, PartitionFiles]:
    """Every partition the sources hold now, keyed by partition key, in key order."""
    found: dict[str, PartitionFiles] = {}
    for source in sources:
        if not source.path.exists():
            continue  # e.g. a Hub dataset not fetched yet; the CLI refuses such a source up front
        for file in reader_for(source.kind).discover(source.path, source.name):
            key = partition_key(source.name, file.split)
            found.setdefault(key, PartitionFiles(key, source, file.split, [])).files.append(file)
    return dict(sorted(found.items()))


def emptied_sources(
    sources: list[Source], listing: dict[str, PartitionFiles], committed: dict[str, PartitionState]
) -> dict[str, list[str]]:
    """Sources that list no files they can read now although the committed build holds partitions
    from them (name -> those partition keys). Building would delete all their rows, and an emptied
    folder is far more often a mistyped path or an unmounted disk than a wish: dropping a source
    takes ``--remove-source``. Files behind links whose targets are gone (the disk behind them
    unmounted) and hidden names count as no files: such a listing is as empty as a missing folder.
    A source the committed build holds nothing from (a new, still empty
    landing folder) is not one of them."""
    listed = {part.source.name for part in listing.values() if any(f.problem is None for f in part.files)}
    return {source.name: keys for source in sources if source.name not in listed
            and (keys := sorted(k for k, part in committed.items() if part.source == source.name))}


def emptied_message(source: Source, keys: list[str], build: int | None) -> str:
    """Why a build refuses an emptied source (:func:`emptied_sources`), and the three ways on."""
    where = source.url or source.path
    state = "does not exist" if not source.url and not source.path.exists() else f"lists no {source.kind} files"
    if not source.url and source.path.exists():
        unread = [f for f in reader_for(source.kind).discover(source.path, source.name) if f.problem is not None]
        if unread:
            first = unread[0]
            state = (f"lists no {source.kind} files it can read ({len(unread)} it cannot, e.g. {first.relpath}: "
                     f"{first.problem.reason})")
    held = f"build {build}" if build is not None else "the committed build"
    shown = ", ".join(keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
    return (f"source {source.name}: {where} {state}, but {held} holds {len(keys)} partition(s) from it ({shown}); "
            f"nothing was removed. Restore its files, give its new place with --source {source.name}:{source.kind}="
            f"PATH, or drop it and its rows on purpose with --remove-source {source.name}")


@functools.lru_cache(maxsize=4096)
def _manifest(path: str) -> dict[str, Any] | None:
    """A generation's manifest, read once per process (generations never change)."""
    return load_manifest(Path(path))


def manifest_of(warehouse: Warehouse, generation: str) -> dict[str, Any] | None:
    return _manifest(str(warehouse.path(generation)))


def in_order(listing: dict[str, PartitionFiles]) -> list[str]:
    """The order a build decides partitions in: graph sources by key, then label sources (matched
    against the graphs), then prediction sources (matched against every annotation)."""
    return sorted(listing, key=lambda k: (tier(listing[k].source.kind), k))


def reads_cases(kind: str) -> bool:
    """A label or prediction source: matched against what the sources read before it hold
    (``attribution.load_cases(..., below=tier(kind))``), not claiming graph ids."""
    return tier(kind) > 0


def claimed_before(warehouse: Warehouse, snapshot: Snapshot, key: str) -> dict[str, str]:
    """Graph ids loaded by the snapshot's partitions ordered before ``key`` -> the file they came from."""
    return claimed_by(warehouse, {k: part.generation for k, part in snapshot.partitions.items()}, key)


def claimed_by(warehouse: Warehouse, generations: dict[str, str], key: str) -> dict[str, str]:
    """:func:`claimed_before` for partitions given as key -> generation (what a fan-out step is sent)."""
    claimed: dict[str, str] = {}
    for other in sorted(generations):
        if other >= key:
            break
        manifest = manifest_of(warehouse, generations[other])
        for gid, first in (loaded_graphs(manifest) if manifest else {}).items():
            claimed.setdefault(gid, first)
    return claimed


@dataclass
class Decision:
    key: str
    action: Literal["keep", "adopt", "ingest"]
    state: PartitionState | None = None  # keep / adopt: the generation taken
    previous: Path | None = None  # ingest: the generation whose unchanged files' rows are copied
    fingerprint: str = ""


def decide(
    warehouse: Warehouse,
    part: PartitionFiles,
    committed: PartitionState | None,
    claimed: dict[str, str],
    *,
    full: bool = False,
    context: str = "",
) -> Decision:
    """Keep, adopt or ingest one partition (``full``: always ingest, parsing every file). ``context``:
    what its rows depend on besides its files (pipelines.builds.changes.partition_context: the annotations a
    prediction source is matched against, the reader options its source sets)."""
    kind = part.source.kind
    fingerprint = files_fingerprint(kind, part.files, context)
    generations = warehouse.generations(part.key)
    if not full:
        ordered = sorted(generations, key=lambda g: committed is None or warehouse.rel(g) != committed.generation)
        for generation in ordered:
            rel = warehouse.rel(generation)
            state = fitting(warehouse, part, rel, claimed, fingerprint)
            if state is not None:
                action = "keep" if committed is not None and committed.generation == rel else "adopt"
                return Decision(part.key, action, state, fingerprint=fingerprint)
    previous = None if full else previous_generation(warehouse, part.key)
    return Decision(part.key, "ingest", previous=previous, fingerprint=fingerprint)


def fitting(
    warehouse: Warehouse, part: PartitionFiles, generation: str, claimed: dict[str, str], fingerprint: str = ""
) -> PartitionState | None:
    """The snapshot entry of complete generation ``generation`` (relative path) if it is right for
    ``part`` now: built from the same files (``fingerprint``, default: of ``part``'s graph files and
    its source's options) by the same source, for the graph ids ``claimed`` before it; else None."""
    manifest = manifest_of(warehouse, generation)
    fingerprint = fingerprint or files_fingerprint(part.source.kind, part.files,
                                                   partition_context("", part.source.option_values))
    if (manifest and manifest.get("fingerprint") == fingerprint and manifest.get("source") == part.source.name
            and claims_hold(manifest, claimed)
            and all(warehouse.path(piece).is_dir() for piece in piece_paths(manifest))):  # none collected
        return PartitionState(part.key, part.source.name, part.source.kind, part.split, generation, fingerprint,
                              tuple(piece_paths(manifest)))
    return None


def previous_generation(warehouse: Warehouse, key: str) -> Path | None:
    """The newest complete generation of a partition (committed or not): the ingest copies the rows
    of the files it shares with it."""
    return next((g for g in warehouse.generations(key) if manifest_of(warehouse, warehouse.rel(g))), None)


def generation_state(warehouse: Warehouse, part: PartitionFiles, generation: Path) -> PartitionState:
    """The snapshot entry of a generation just written for ``part``."""
    manifest = json.loads((generation / MANIFEST).read_text())
    return PartitionState(part.key, part.source.name, part.source.kind, part.split, warehouse.rel(generation),
                          manifest["fingerprint"], tuple(piece_paths(manifest)))


Flatten = Callable[[PartitionFiles, dict[str, str], Cases | None, Path | None], PartitionState]


@dataclass
class Plan:
    """What one build does with each split: ``actions`` maps every listed key, in the order decided,
    to keep | adopt | ingest | built (flattened by this build, here or on a cluster); ``removed``
    lists the snapshot's keys no longer listed. A plan made without a flattening function (a dry
    plan) says ``ingest`` and leaves the snapshot's entry as it was."""

    actions: dict[str, str]
    removed: list[str]

    def keys(self, *actions: str) -> list[str]:
        return [key for key, action in self.actions.items() if action in actions]

    @property
    def changes(self) -> bool:
        return bool(self.removed or self.keys("ingest", "adopt", "built"))


def plan_splits(
    warehouse: Warehouse,
    listing: dict[str, PartitionFiles],
    snapshot: Snapshot,
    committed: dict[str, PartitionState],
    *,
    full: bool = False,
    flatten: Flatten | None = None,
    fanned: dict[str, str] | None = None,
    decided: Callable[[str, str], None] = lambda key, action: None,
) -> Plan:
    """The one planning loop: decide every listed split in order (graph ids are claimed first come
    first served; label and prediction sources are matched against the tiers before them) and put
    the generation each takes into ``snapshot``. ``flatten(part, claimed, cases, previous)`` writes
    a new generation for a split no complete one fits; without it the plan is dry. ``fanned``: key
    -> a generation a cluster's step wrote ahead, taken when its claims still hold. ``decided`` is
    told each key and its action as soon as it is decided (``removed`` before it leaves the snapshot)."""
    from pipelines.analytics.attribution import load_cases

    removed = [key for key in sorted(snapshot.partitions) if key not in listing]
    for key in removed:
        decided(key, "removed")
        del snapshot.partitions[key]
    fanned = fanned or {}
    actions: dict[str, str] = {}
    cases_by_tier: dict[int, Cases] = {}  # tier -> the annotations the splits before it hold
    for key in in_order(listing):
        part = listing[key]
        cases = None
        if reads_cases(part.source.kind):
            level = tier(part.source.kind)
            if level not in cases_by_tier:  # the splits before this tier are all decided: index them once
                cases_by_tier[level] = load_cases(warehouse, snapshot, below=level)
            cases = cases_by_tier[level]
        cases_digest = cases.digest if cases is not None else ""
        context = partition_context(cases_digest, part.source.option_values)
        claimed = {} if cases_digest else claimed_before(warehouse, snapshot, key)
        if key in fanned and (state := fitting(warehouse, part, fanned[key], claimed)) is not None:
            snapshot.partitions[key], actions[key] = state, "built"
        else:
            decision = decide(warehouse, part, committed.get(key), claimed, full=full, context=context)
            if decision.action != "ingest":
                assert decision.state is not None
                snapshot.partitions[key], actions[key] = decision.state, decision.action
            elif flatten is None:
                actions[key] = "ingest"
            else:
                snapshot.partitions[key] = flatten(part, claimed, cases, decision.previous)
                actions[key] = "built"
        decided(key, actions[key])
    return Plan(actions, removed)
