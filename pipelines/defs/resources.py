"""The one resource every asset uses, configuration only: where the warehouse is, which sources feed
it, which build attempt a run belongs to and how it was asked for. Beside it, the two things every
asset asks of it: the sources' listing and the run's build attempt."""

from __future__ import annotations

import uuid
from pathlib import Path

import dagster as dg

from pipelines.builds.flattening import lent_to, list_sources
from pipelines.builds.plan import PartitionFiles
from pipelines.config import (
    Source,
    load_settings,
    option_specs,
    parse_source,
    recorded_form,
    resolve_sources,
    with_option_specs,
)
from pipelines.progress import show
from pipelines.storage.state import Attempt, CommitLog
from pipelines.storage.warehouse import Warehouse


class TracehouseResource(dg.ConfigurableResource):
    """Warehouse folder and sources (``NAME:KIND=PATH``; empty = the sources the warehouse recorded,
    or the embedded sample corpus for a new warehouse). ``attempt`` names the build attempt a run
    belongs to (set by ``tracehouse build``); a run started by Dagster itself makes its own."""

    warehouse: str
    sources: list[str] = []
    source_options: list[str] = []  # the options ``sources`` set, as NAME.OPTION=JSON (config.option_specs)
    # NAME=URL of ``sources`` kept elsewhere (s3://, a Phoenix project), whose specs name their local
    # mirrors: a run Dagster started syncs them (pipelines.builds.source_sync) and records their URLs
    source_urls: list[str] = []
    attempt: str = ""
    full: bool = False
    strict: bool = False
    progress: bool = False
    pictures: str = ""  # none | svg | png (tracehouse build --pictures); empty: $TRACEHOUSE_PICTURES, else none
    # tracehouse.toml, beside which a team's taxonomy_crosswalk.csv is (pipelines.analytics.crosswalk); empty:
    # none, the working directory's, as for `tracehouse build` without a config
    config_file: str = ""

    @classmethod
    def from_settings(cls, settings, **fields) -> TracehouseResource:
        """Sources as configured (flags or tracehouse.toml); none: the warehouse's recorded ones."""
        return cls(warehouse=str(settings.warehouse), sources=[f"{s.name}:{s.kind}={s.path}" for s in settings.sources],
                   source_options=option_specs(settings.sources), source_urls=url_specs(settings.sources),
                   config_file=_config_text(settings), **fields)

    @classmethod
    def for_sources(cls, warehouse: Warehouse, sources: list[Source], **fields) -> TracehouseResource:
        specs = [f"{s.name}:{s.kind}={s.path}" for s in sources]
        return cls(warehouse=str(warehouse.root), sources=specs, source_options=option_specs(sources),
                   source_urls=url_specs(sources), **fields)

    @property
    def wh(self) -> Warehouse:
        return Warehouse(self.warehouse)

    @property
    def config_path(self) -> Path | None:
        return Path(self.config_file) if self.config_file else None

    def resolved_sources(self) -> list[Source]:
        if self.sources:
            urls = dict(spec.split("=", 1) for spec in self.source_urls)
            return [Source(s.name, s.kind, s.path, urls.get(s.name, ""), tuple(s.option_values.items()))
                    for s in with_option_specs([parse_source(spec) for spec in self.sources], self.source_options)]
        record = CommitLog(self.wh).latest()
        return resolve_sources([], record.sources if record else None, self.wh.root)

    def say(self, message: str) -> None:
        """One progress line on stderr (when the build shows progress)."""
        if self.progress:
            show(message, "  ")


def listing(tracehouse: TracehouseResource, attempt_id: str = "") -> dict[str, PartitionFiles]:
    """Every split the sources hold, keyed by partition key, in key order: the listing the build
    process lent its run (pipelines.builds.flattening.lend), else listed now."""
    lent = lent_to(attempt_id or tracehouse.attempt)
    if lent is not None:
        return lent.listing
    return list_sources(tracehouse.wh, tracehouse.resolved_sources(), tracehouse.say)


def run_attempt(tracehouse: TracehouseResource,
                context: dg.OpExecutionContext | dg.AssetCheckExecutionContext) -> Attempt:
    """The build attempt of this run: ``tracehouse build``'s, or, for a run Dagster started (UI,
    sensor, schedule), the run's own: started from the last committed build by the run's first step
    that needs it. A run that does not flatten works on the committed tables."""
    if tracehouse.attempt:
        return Attempt.load(tracehouse.wh, tracehouse.attempt)
    try:
        attempt_id = f"run-{context.run.run_id}"
    except Exception:  # noqa: BLE001 - a context built for a direct call has no run
        attempt_id = f"call-{uuid.uuid4().hex[:12]}"
    try:
        return Attempt.load(tracehouse.wh, attempt_id)
    except FileNotFoundError:
        pass
    attempt = Attempt.start(tracehouse.wh, CommitLog(tracehouse.wh).latest(), attempt_id)
    attempt.sources = [recorded_form(s, tracehouse.wh.root) for s in tracehouse.resolved_sources()]
    attempt.save()
    return attempt


def default_resource() -> TracehouseResource:
    """The resource the Dagster UI and the daemon use: tracehouse.toml's sources, else the ones the
    warehouse recorded (resolved when a run needs them), else the sample corpus."""
    settings = load_settings(require_paths=False)
    specs = [f"{s.name}:{s.kind}={s.path}" for s in settings.sources]
    return TracehouseResource(warehouse=str(settings.warehouse), sources=specs,
                              source_options=option_specs(settings.sources), source_urls=url_specs(settings.sources),
                              config_file=_config_text(settings))


def url_specs(sources: list[Source]) -> list[str]:
    """NAME=URL of the sources kept elsewhere (TracehouseResource.source_urls)."""
    return [f"{s.name}={s.url}" for s in sources if s.url]


def _config_text(settings) -> str:
    return str(settings.config_file.resolve()) if settings.config_file is not None else ""
