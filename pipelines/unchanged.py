"""A build with nothing to do, decided before Dagster or Great Expectations are imported.

``tracehouse build`` asks here first: when the last committed build covers exactly the sources'
files, the sources and the code now (the same inputs digest the full build computes), and nothing
of a build killed earlier waits to be finished, published or recorded, the build is said to stand
and the process ends without importing Dagster, GX or Altair (their imports alone outlast the 1 s a
build with nothing to do may take). Any doubt answers None, and the full build
(pipelines.build.run_build) decides, as it always did.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from pipelines import iceberg
from pipelines.attribution import load_cases
from pipelines.commit import published_build
from pipelines.config import Settings, pictures_option, recorded_form, resolve_sources
from pipelines.locks import build_lock
from pipelines.plan import claimed_before, decide, discover, emptied_sources, in_order, reads_cases
from pipelines.progress import event
from pipelines.readers import tier
from pipelines.state import CommitLog, inputs_digest, recorded_build
from pipelines.storage import Warehouse
from pipelines.summary import BuildSummary, code_fingerprint, describe, say


def unchanged_build(
    settings: Settings,
    *,
    full: bool = False,
    strict: bool = False,
    remove_sources: list[str] | tuple[str, ...] = (),
    pictures: str | None = None,
    progress: bool = True,
    out: TextIO = sys.stderr,
) -> BuildSummary | None:
    """The summary of the committed build that stands, when there is nothing to build; else None
    (the full build then runs). Reads only: it writes nothing and starts nothing."""
    started = time.monotonic()
    if full or strict or remove_sources or settings.remote:
        return None  # each asks for work or checks the full build does
    warehouse = Warehouse(settings.warehouse)
    last = CommitLog(warehouse).latest()
    if last is None or not _settled(warehouse, last.build):
        return None
    with build_lock(warehouse):  # raises BuildLocked as the full build would
        try:
            sources = resolve_sources(settings.sources, last.sources, warehouse.root, (), settings.storage)
        except Exception:  # noqa: BLE001 - a refusal is the full build's to say, in its words
            return None
        if any(source.url or not source.path.exists() for source in sources):
            return None
        listing = discover(sources)
        committed = last.snapshot.partitions
        if not listing or set(listing) != set(committed) or emptied_sources(sources, listing, committed):
            return None
        fingerprints: dict[str, str] = {}
        cases_digests: dict[int, str] = {}  # tier -> the digest of what the sources before it hold
        for key in in_order(listing):
            part = listing[key]
            context = ""
            if reads_cases(part.source.kind):  # as the full build decides it (pipelines.build._flatten)
                level = tier(part.source.kind)
                if level not in cases_digests:
                    cases_digests[level] = load_cases(warehouse, last.snapshot, below=level).digest
                context = cases_digests[level]
            claimed = {} if context else claimed_before(warehouse, last.snapshot, key)
            decision = decide(warehouse, part, committed.get(key), claimed, context=context)
            if decision.action != "keep" or decision.state != committed[key]:
                return None
            fingerprints[key] = decision.state.fingerprint
        pictures = pictures_option(pictures)
        code = code_fingerprint()
        code = code if pictures == "none" else f"{code}+pictures={pictures}"
        if inputs_digest(code, [recorded_form(s, warehouse.root) for s in sources], fingerprints) != last.inputs:
            return None
        summary = BuildSummary(warehouse.root, code=code_fingerprint())
        summary.files_found = sum(len(p.files) for p in listing.values())
        summary.partitions_unchanged = list(in_order(listing))
        say(out, progress, event("nothing_changed", build=last.build))
        describe(warehouse, last, summary)
    summary.seconds = time.monotonic() - started
    return summary


def _settled(warehouse: Warehouse, build: int) -> bool:
    """Nothing a killed build left waits: its root copies and Iceberg snapshots are published, its
    commit is recorded in Dagster, and no attempt of it is left in staging."""
    if published_build(warehouse) != build or recorded_build(warehouse) != build:
        return False
    if iceberg.enabled(warehouse) and iceberg.published(warehouse, build) is None:
        return False
    staging = warehouse.staging_dir
    return not (staging.is_dir() and any(staging.iterdir()))
