"""The one resource every asset uses: where the warehouse is, which sources feed it, and which build
attempt a run belongs to."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import dagster as dg

from pipelines.config import Source, SourceUnavailable, load_settings, parse_source, resolve_sources
from pipelines.ingest import Progress
from pipelines.plan import PartitionFiles, decide, discover, emptied_message, emptied_sources
from pipelines.progress import event, show
from pipelines.state import Attempt, CommitLog
from pipelines.storage import Warehouse


class TracehouseResource(dg.ConfigurableResource):
    """Warehouse folder and sources (``NAME:KIND=PATH``; empty = the sources the warehouse recorded,
    or the embedded sample corpus for a new warehouse). ``attempt`` names the build attempt a run
    belongs to (set by ``tracehouse build``); a run started by Dagster itself makes its own."""

    warehouse: str
    sources: list[str] = []
    attempt: str = ""
    full: bool = False
    strict: bool = False
    progress: bool = False
    pictures: str = ""  # none | svg | png (tracehouse build --pictures); empty: $TRACEHOUSE_PICTURES, else none

    @classmethod
    def from_settings(cls, settings, **fields) -> TracehouseResource:
        """Sources as configured (flags or tracehouse.toml); none: the warehouse's recorded ones."""
        return cls(warehouse=str(settings.warehouse), sources=[f"{s.name}:{s.kind}={s.path}" for s in settings.sources],
                   **fields)

    @classmethod
    def for_sources(cls, warehouse: Warehouse, sources: list[Source], **fields) -> TracehouseResource:
        specs = [f"{s.name}:{s.kind}={s.path}" for s in sources]
        return cls(warehouse=str(warehouse.root), sources=specs, **fields)

    @property
    def wh(self) -> Warehouse:
        return Warehouse(self.warehouse)

    def resolved_sources(self) -> list[Source]:
        if self.sources:
            return [parse_source(spec) for spec in self.sources]
        record = CommitLog(self.wh).latest()
        return resolve_sources([], record.sources if record else None, self.wh.root)

    def partitions(self) -> dict[str, PartitionFiles]:
        """Every partition the sources hold now, keyed by partition key, in key order (inside
        :func:`pinned_listing`, the listing the build took once)."""
        pinned = getattr(_PINNED, "listing", None)
        if pinned and pinned[0] == (self.warehouse, self.sources):
            return pinned[1]
        return self.discover()

    def discover(self) -> dict[str, PartitionFiles]:
        """List the sources' files now (generating the sample corpus if it is the source and missing)."""
        sources = self.resolved_sources()
        if any(s.path in (self.wh.corpus_dir, self.wh.sample_predictions_dir) or s.path.parent ==
               self.wh.sample_predictions_dir for s in sources):
            ensure_sample_corpus(self.wh, self.say)
        return discover(sources)

    def attempt_for(self, context: dg.OpExecutionContext | dg.AssetCheckExecutionContext) -> Attempt:
        """The build attempt of this run: ``tracehouse build``'s, or, for a run Dagster started (the
        sensor and automation in ``tracehouse ui``), one made for the run from the last committed
        build and the newest complete generation of every partition whose files it matches."""
        if self.attempt:
            return Attempt.load(self.wh, self.attempt)
        try:
            attempt_id = f"run-{context.run.run_id}"
        except Exception:  # noqa: BLE001 - a context built for a direct call has no run
            attempt_id = f"call-{uuid.uuid4().hex[:12]}"
        try:
            return Attempt.load(self.wh, attempt_id)
        except FileNotFoundError:
            pass
        warehouse = self.wh
        last = CommitLog(warehouse).latest()
        attempt = Attempt.start(warehouse, last, attempt_id)
        listing = self.discover()
        sources = self.resolved_sources()
        for name, keys in emptied_sources(sources, listing, attempt.snapshot.partitions).items():  # not a deletion
            attempt.discard()
            source = next(s for s in sources if s.name == name)
            raise SourceUnavailable(emptied_message(source, keys, last.build if last else None))
        snapshot = attempt.snapshot
        for key in [k for k in snapshot.partitions if k not in listing]:
            del snapshot.partitions[key]
        from pipelines.attribution import load_cases
        from pipelines.plan import claimed_before, in_order, reads_cases
        from pipelines.readers import tier

        digests: dict[int, str] = {}
        for key in in_order(listing):
            part = listing[key]
            if reads_cases(part.source.kind):
                level = tier(part.source.kind)
                digests[level] = digests.get(level) or load_cases(warehouse, snapshot, below=level).digest
                decision = decide(warehouse, part, snapshot.partitions.get(key), {}, context=digests[level])
            else:
                claimed = claimed_before(warehouse, snapshot, key)
                decision = decide(warehouse, part, snapshot.partitions.get(key), claimed)
            if decision.state is not None:
                snapshot.partitions[key] = decision.state
        attempt.sources = [recorded(s, warehouse) for s in self.resolved_sources()]
        attempt.save()
        return attempt

    def say(self, message: str) -> None:
        """One progress line on stderr (when the build shows progress)."""
        if self.progress:
            show(message, "  ")

    def report(self, progress: Progress) -> None:
        """One progress line per file on stderr, throttled for long splits."""
        if not self.progress:
            return
        now = time.monotonic()
        last = getattr(self, "_last_report", 0.0)
        done = progress.files_done == progress.files_total
        if not done and now - last < 0.5:
            return
        object.__setattr__(self, "_last_report", now)
        rate = progress.bytes_done / 1e6 / max(now - progress.started, 1e-6)
        show(event("partition_files", partition=progress.partition, files_done=progress.files_done,
                   files_total=progress.files_total, mb_done=progress.bytes_done / 1e6,
                   mb_total=progress.bytes_total / 1e6, mb_per_s=rate, reused=progress.reused,
                   errors=progress.errors), "  ")


def recorded(source: Source, warehouse: Warehouse) -> dict[str, str]:
    from pipelines.config import recorded_form

    return recorded_form(source, warehouse.root)


_PINNED = threading.local()  # in-process Dagster runs execute on the thread that started them


@contextmanager
def pinned_listing(resource: TracehouseResource, listing: dict[str, PartitionFiles]) -> Iterator[None]:
    """Pin one listing of the sources for a whole build: its in-process runs see that one listing
    (one consistent snapshot, and 400 files are not listed three times)."""
    outer = getattr(_PINNED, "listing", None)
    _PINNED.listing = ((resource.warehouse, resource.sources), listing)
    try:
        yield
    finally:
        _PINNED.listing = outer


def ensure_sample_corpus(warehouse: Warehouse, say: Callable[[str], None] = lambda _: None) -> None:
    """Generate the embedded default corpus (and the simulated methods' predictions over it) into
    the warehouse the first time they are needed, saying how far it got about twice a second."""
    from pipelines.sample import archive

    corpus, predictions = warehouse.corpus_dir, warehouse.sample_predictions_dir
    wanted = {"corpus": corpus, "corpus-predictions": predictions}
    staging = {folder: final.with_name(f".{final.name}-{uuid.uuid4().hex[:8]}.tmp")
               for folder, final in wanted.items() if not final.is_dir()}
    if staging and archive.unpack(staging):  # the copy shipped with the code (pipelines/sample/archive.py)
        for folder, staged in staging.items():
            staged.rename(wanted[folder])  # a half-written folder is never mistaken for the real one
    if not corpus.is_dir():
        from pipelines.sample.corpus import generate_corpus

        last = [time.monotonic()]

        def progress(line: str) -> None:
            if time.monotonic() - last[0] >= 0.5:
                say(f"sample corpus {line}")
                last[0] = time.monotonic()

        staging = corpus.with_name(f".corpus-{uuid.uuid4().hex[:8]}.tmp")
        generate_corpus(staging, progress=progress)
        staging.rename(corpus)  # a half-generated corpus is never mistaken for the real one
    if not predictions.is_dir():
        from pipelines.sample.predictions import simulate_predictions

        staging = predictions.with_name(f".predictions-{uuid.uuid4().hex[:8]}.tmp")
        simulate_predictions(corpus, staging)
        staging.rename(predictions)


def default_resource() -> TracehouseResource:
    """The resource the Dagster UI and the daemon use: tracehouse.toml's sources, else the ones the
    warehouse recorded (resolved when a run needs them), else the sample corpus."""
    settings = load_settings(require_paths=False)
    specs = [f"{s.name}:{s.kind}={s.path}" for s in settings.sources]
    return TracehouseResource(warehouse=str(settings.warehouse), sources=specs)
