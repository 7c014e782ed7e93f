"""The one resource every asset uses: where the warehouse is and which sources feed it."""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import dagster as dg

from pipelines.config import SAMPLE_SOURCE, Settings, Source, load_settings, parse_source
from pipelines.ingest import Progress
from pipelines.readers import reader_for
from pipelines.readers.base import SourceFile
from pipelines.storage import Warehouse, partition_key


@dataclass
class PartitionFiles:
    """The files of one source split: what one partition of the tables is built from."""

    key: str
    source: Source
    split: str
    files: list[SourceFile]


class TracehouseResource(dg.ConfigurableResource):
    """Warehouse folder and sources (``NAME:KIND=PATH``); empty sources = the embedded sample corpus."""

    warehouse: str
    sources: list[str] = []
    full: bool = False
    strict: bool = False
    progress: bool = False

    @classmethod
    def from_settings(cls, settings: Settings, **flags: bool) -> TracehouseResource:
        specs = [f"{s.name}:{s.kind}={s.path}" for s in settings.sources]
        return cls(warehouse=str(settings.warehouse), sources=specs, **flags)

    @property
    def wh(self) -> Warehouse:
        return Warehouse(self.warehouse)

    def resolved_sources(self) -> list[Source]:
        if self.sources:
            return [parse_source(spec) for spec in self.sources]
        return [sample_source(self.wh)]

    def partitions(self) -> dict[str, PartitionFiles]:
        """Every partition the sources hold now, keyed by partition key, in key order (inside
        :func:`pinned_listing`, the listing the build took once)."""
        pinned = getattr(_PINNED, "listing", None)
        if pinned and pinned[0] == (self.warehouse, self.sources):
            return pinned[1]
        return self.discover()

    def discover(self) -> dict[str, PartitionFiles]:
        """List the sources' files now."""
        found: dict[str, PartitionFiles] = {}
        for source in self.resolved_sources():
            if not source.path.exists():
                continue  # e.g. a Hub dataset not fetched yet; the CLI refuses such a source up front
            for file in reader_for(source.kind).discover(source.path, source.name):
                key = partition_key(source.name, file.split)
                found.setdefault(key, PartitionFiles(key, source, file.split, [])).files.append(file)
        return dict(sorted(found.items()))

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
        print(
            f"  {progress.partition}: {progress.files_done}/{progress.files_total} files, "
            f"{progress.bytes_done / 1e6:.1f}/{progress.bytes_total / 1e6:.1f} MB ({rate:.0f} MB/s), "
            f"{progress.reused} reused, {progress.errors} errors",
            file=sys.stderr,
            flush=True,
        )


_PINNED = threading.local()  # in-process Dagster runs execute on the thread that started them


@contextmanager
def pinned_listing(resource: TracehouseResource) -> Iterator[dict[str, PartitionFiles]]:
    """List the sources once for a whole build: its in-process runs see that one listing (one
    consistent snapshot, and 400 files are not listed three times)."""
    listing = resource.discover()
    outer = getattr(_PINNED, "listing", None)
    _PINNED.listing = ((resource.warehouse, resource.sources), listing)
    try:
        yield listing
    finally:
        _PINNED.listing = outer


def sample_source(warehouse: Warehouse) -> Source:
    """The embedded default corpus, generated into the warehouse the first time it is needed."""
    corpus = warehouse.corpus_dir
    if not corpus.is_dir():
        from pipelines.sample import generate_corpus

        staging = corpus.with_name(f".corpus-{uuid.uuid4().hex[:8]}.tmp")
        generate_corpus(staging)
        staging.rename(corpus)  # a half-generated corpus is never mistaken for the real one
    return Source(SAMPLE_SOURCE, "memtracebench", corpus)


def default_resource() -> TracehouseResource:
    """The resource the Dagster UI and the daemon use: tracehouse.toml or the defaults."""
    return TracehouseResource.from_settings(load_settings(require_paths=False))
