"""Sources and the warehouse location: declared once, shared by the CLI, the Dagster UI and schedules.

Resolution order: command-line flags, then ``tracehouse.toml`` (in the working directory, or
the file named by ``$TRACEHOUSE_CONFIG``), then what the warehouse remembers (the sources of its
last committed build), then the defaults (warehouse ``warehouse/``; the embedded sample corpus,
only for a warehouse that has no recorded sources). Sources named on the command line or in the
file must include every recorded one: dropping one takes ``--remove-source NAME``
(:func:`resolve_sources`). Unknown keys in the file are an error::

    warehouse = "warehouse"

    [[sources]]
    kind = "whowhen"                 # one of pipelines.readers.KINDS (docs/SOURCES.md)
    path = "../shared/data/whowhen"  # relative to this file
    # name = "whowhen"               # optional, defaults to the kind; must be unique
    # [sources.options]              # the reader's options, if its kind takes any (docs/SOURCES.md)
    # failure_scores = ["correctness"]   # e.g. a langfuse source's score names that are failure labels

    [schedule]
    cron = "0 3 * * *"               # the daily full consistency pass

    [[hub]]                          # datasets the hub_revision_sensor keeps up to date
    kind = "memtracebench"
    dest = "data/memtracebench"      # point a [[sources]] entry at the same folder
    # repo_id = "zjunlp/MemTraceBench"; revision = "main"

    [iceberg]
    enabled = true                   # publish every build as Apache Iceberg snapshots (docs/SCALE.md)
    # catalog = "postgresql+psycopg2://user@host/db"   # a shared catalog (default: <warehouse>/iceberg/catalog.db)
    # namespace = "team_a"           # the tables' namespace (default tracehouse): one per warehouse

    [executor]                       # where tracehouse build flattens changed partitions (pipelines.builds.executors)
    kind = "dask"                    # in_process (default) | dask: parallel Dagster steps on a Dask cluster
    workers = 2                      # dask: worker processes of the local cluster the build starts (default 2)
    # scheduler = "tcp://host:8786"  # dask: an existing cluster (workers share the filesystem, or the store for s3://)

    [storage]                        # for s3:// warehouses and sources (pipelines.storage.remote, docs/SCALE.md)
    endpoint = "http://127.0.0.1:9000"   # default: $AWS_ENDPOINT_URL, else AWS itself
    region = "us-east-1"                 # default: $AWS_REGION
    cache = "~/.cache/tracehouse"        # working copies and source mirrors (default: $TRACEHOUSE_CACHE, else this)

The warehouse and any source path may be ``s3://bucket/prefix`` (credentials from the usual AWS
variables); the warehouse is then built in a local working copy and committed to the store. A
``phoenix`` source may be a running Phoenix's project, ``http://HOST:PORT/PROJECT``, which a build
saves into the cache folder first (pipelines.builds.source_sync).
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines.errors import ConfigError
from pipelines.readers import KINDS, unknown_kind
from pipelines.storage.remote import StoreOptions, bind, is_http, is_url, local_copy

CONFIG_FILE = "tracehouse.toml"
DEFAULT_WAREHOUSE = "warehouse"
DEFAULT_CRON = "0 3 * * *"
SAMPLE_SOURCE = "sample"
HTTP_KINDS = ("phoenix",)  # kinds whose source may be a running server's URL


# Every key tracehouse.toml may hold, per table; anything else is a typo to report, not to ignore.
CONFIG_KEYS: dict[str, set[str]] = {
    "": {"warehouse", "sources", "schedule", "hub", "iceberg", "storage", "executor"},
    "sources": {"kind", "path", "name", "options"},
    "schedule": {"cron"},
    "hub": {"kind", "dest", "repo_id", "revision"},
    "iceberg": {"enabled", "catalog", "namespace"},
    "storage": {"endpoint", "region", "cache"},
    "executor": {"kind", "workers", "scheduler", "dagster_home"},
}


NAME = r"[A-Za-z_]\w*"  # an Iceberg namespace of ours


class SourceUnavailable(ConfigError):
    """A source the warehouse holds rows of is missing or lists no files: the build is refused rather
    than deleting its rows (a mistyped path, an unmounted disk); ``tracehouse watch`` waits for it."""


PICTURES = ("none", "svg", "png")  # what a build draws besides the failure views (--pictures)
PICTURES_ENV = "TRACEHOUSE_PICTURES"


def pictures_option(value: str | None = None) -> str:
    """What a build draws besides the failure views: ``value``, else $TRACEHOUSE_PICTURES, else
    'none'. 'svg': a drill-down picture of the first few hundred annotations (TRACEHOUSE_DRILLDOWN_LIMIT);
    'png': those as PNG too, and every chart as PNG."""
    raw = (value if value else os.environ.get(PICTURES_ENV, "")).strip().lower() or "none"
    if raw not in PICTURES:
        raise ConfigError(f"pictures (--pictures or ${PICTURES_ENV}) must be one of {', '.join(PICTURES)}, got {raw!r}")
    return raw


@dataclass(frozen=True)
class Source:
    """A source folder or file; for ``s3://`` sources and a running Phoenix's project (``http(s)://``),
    ``url`` is where it is and ``path`` the local mirror a build syncs it into (pipelines.builds.source_sync)."""

    name: str
    kind: str
    path: Path
    url: str = ""
    # The reader's options this source sets (tracehouse.toml's [sources.options]), by name, lists as
    # tuples: checked against what the kind's reader declares (its OPTIONS), the unset ones its defaults.
    options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(unknown_kind(self.kind))
        if not re.fullmatch(r"[A-Za-z0-9_.\-]+", self.name):
            raise ConfigError(f"source name {self.name!r} may only hold letters, digits, '_', '.', '-'")
        if self.options:
            object.__setattr__(self, "options", checked_options(self.name, self.kind, dict(self.options)))

    @property
    def option_values(self) -> dict[str, Any]:
        """The options this source sets, lists as lists (as tracehouse.toml and a build record hold them)."""
        return {name: list(value) if isinstance(value, tuple) else value for name, value in self.options}


def checked_options(source: str, kind: str, given: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """A source's options in :attr:`Source.options` form, refusing (ConfigError) one its kind's reader
    does not declare or of the wrong type, naming the source, the option and the known ones. Imports
    the reader only for a source that sets options."""
    from pipelines.readers import reader_for
    from pipelines.readers.base import declared_options, option_problem

    declared = declared_options(reader_for(kind))
    for name, value in given.items():
        if (problem := option_problem(kind, declared, name, value)) is not None:
            raise ConfigError(f"source {source}: {problem}")
    return tuple(sorted((name, tuple(value) if isinstance(value, list) else value) for name, value in given.items()))


@dataclass(frozen=True)
class HubSource:
    kind: str
    dest: Path
    repo_id: str | None = None
    revision: str = "main"


@dataclass
class Settings:
    warehouse: Path
    sources: list[Source] = field(default_factory=list)
    cron: str = DEFAULT_CRON
    config_file: Path | None = None
    hub: list[HubSource] = field(default_factory=list)
    iceberg: bool | None = None  # [iceberg] enabled: turn the warehouse's Iceberg publication on or off; None: as is
    remote: str | None = None  # s3:// URL of the warehouse; ``warehouse`` is then its local working copy
    storage: StoreOptions = field(default_factory=StoreOptions)
    iceberg_catalog: str | None = None  # [iceberg] catalog: a SQLAlchemy URL; None: as is (default: the SQLite file)
    iceberg_namespace: str | None = None  # [iceberg] namespace; None: as is (default: tracehouse)


def parse_source(spec: str, base: Path | None = None, storage: StoreOptions | None = None) -> Source:
    """``KIND=PATH`` or ``NAME:KIND=PATH`` from the command line (PATH may be ``s3://bucket/prefix``)."""
    if "=" not in spec:
        raise ConfigError(f"--source needs KIND=PATH (or NAME:KIND=PATH), got {spec!r}")
    left, path = spec.split("=", 1)
    name, _, kind = left.rpartition(":")
    return make_source(name.strip() or kind.strip(), kind.strip(), path.strip(), base, storage)


def make_source(name: str, kind: str, path: str, base: Path | None, storage: StoreOptions | None = None,
                options: dict[str, Any] | None = None) -> Source:
    # not a folder: say so rather than look for "http:/..." on disk
    if is_http(path) and kind in KINDS and kind not in HTTP_KINDS:
        raise ConfigError(f"source {name}: a {kind} source is a folder or an s3:// prefix, not {path}; only "
                          f"{', '.join(HTTP_KINDS)} sources take an http(s) URL (docs/SOURCES.md)")
    if is_http(path):  # a running server: a build saves what it serves in a cache folder (builds.source_sync)
        from pipelines.readers.phoenix import project_url

        try:
            project_url(path)
        except ValueError as exc:
            raise ConfigError(f"source {name}: {exc}") from None
    if is_url(path) or is_http(path):
        try:
            return Source(name, kind, local_copy(path, storage or StoreOptions()), path.rstrip("/"),
                          tuple((options or {}).items()))
        except ValueError as exc:
            raise ConfigError(f"source {name}: {exc}") from None
    return Source(name, kind, _resolve(path, base), options=tuple((options or {}).items()))


def _resolve(path: str, base: Path | None) -> Path:
    candidate = Path(path).expanduser()
    if not candidate.is_absolute() and base is not None:
        candidate = base / candidate
    return candidate.resolve()


def load_settings(
    warehouse: str | None = None,
    sources: list[str] | None = None,
    config: str | None = None,
    require_paths: bool = True,
) -> Settings:
    """Settings from flags, config file and defaults; ``require_paths`` makes a missing source an error
    (the Dagster code location passes False so a not-yet-fetched dataset does not break loading)."""
    config_path = Path(config or os.environ.get("TRACEHOUSE_CONFIG", CONFIG_FILE))
    data: dict = {}
    if config_path.is_file():
        try:
            data = tomllib.loads(config_path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{config_path}: {exc}") from None
        check_keys(config_path, data)
    elif config:
        raise ConfigError(f"config file {config_path} does not exist")
    base = config_path.resolve().parent if config_path.is_file() else Path.cwd()
    given = data.get("storage", {})
    storage = StoreOptions(given.get("endpoint"), given.get("region"),
                           _resolve(given["cache"], base) if "cache" in given else None)

    wh = warehouse or os.environ.get("TRACEHOUSE_WAREHOUSE") or data.get("warehouse", DEFAULT_WAREHOUSE)
    remote = None
    if is_url(wh):
        try:
            remote, wh_path = wh.rstrip("/"), local_copy(wh, storage)
        except ValueError as exc:
            raise ConfigError(f"--warehouse: {exc}") from None
        wh_path.mkdir(parents=True, exist_ok=True)
        bind(wh_path, remote, storage)
    else:
        wh_path = Path(wh).resolve() if (warehouse or os.environ.get("TRACEHOUSE_WAREHOUSE")) else _resolve(wh, base)

    if sources:
        resolved = [parse_source(spec, storage=storage) for spec in sources]
    else:
        resolved = []
        for i, item in enumerate(data.get("sources", [])):
            if not isinstance(item, dict) or "kind" not in item or "path" not in item:
                raise ConfigError(f"{config_path}: sources[{i}] needs 'kind' and 'path'")
            if not isinstance(item.get("options", {}), dict):
                raise ConfigError(f"{config_path}: sources[{i}] options must be a table ([sources.options])")
            resolved.append(make_source(item.get("name", item["kind"]), item["kind"], item["path"], base, storage,
                                        item.get("options")))
    names = [s.name for s in resolved]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise ConfigError(
            f"two sources named {sorted(duplicates)[0]!r}: give each a name with NAME:KIND=PATH"
        )
    for source in resolved if require_paths else []:
        if not source.url and not source.path.exists():
            raise ConfigError(f"source {source.name}: {source.path} does not exist")
    cron = data.get("schedule", {}).get("cron", DEFAULT_CRON)
    hub = [
        HubSource(h["kind"], _resolve(h["dest"], base), h.get("repo_id"), h.get("revision", "main"))
        for h in data.get("hub", [])
    ]
    iceberg = data.get("iceberg", {}).get("enabled")
    if iceberg is not None and not isinstance(iceberg, bool):
        raise ConfigError(f"{config_path}: [iceberg] enabled must be true or false")
    catalog, namespace = data.get("iceberg", {}).get("catalog"), data.get("iceberg", {}).get("namespace")
    if catalog is not None and not (isinstance(catalog, str) and "://" in catalog):
        raise ConfigError(f"{config_path}: [iceberg] catalog must be a SQLAlchemy URL such as "
                          "'postgresql+psycopg2://user@host/db'")
    if namespace is not None and not (isinstance(namespace, str) and re.fullmatch(NAME, namespace, re.ASCII)):
        raise ConfigError(f"{config_path}: [iceberg] namespace must be a name of letters, digits and _")
    return Settings(wh_path, resolved, cron, config_path if config_path.is_file() else None, hub, iceberg, remote,
                    storage, catalog, namespace)


def warehouse_for_reading(warehouse: str | None, config: str | None, build: int | None = None) -> Path:
    """The folder a reading command (sql, show, dashboard) opens; for an ``s3://`` warehouse, its
    working copy, first brought up to the store's latest build (or ``build``)."""
    import sys

    from pipelines.storage.remote import pull

    settings = load_settings(warehouse, None, config)
    if settings.remote:
        pull(settings.warehouse, lambda line: print(f"tracehouse: {line}", file=sys.stderr, flush=True), build)
    return settings.warehouse


def check_keys(path: Path, data: dict[str, Any]) -> None:
    """Refuse keys tracehouse.toml does not know, naming the first (a typo must not fall back silently)."""
    for key, value in data.items():
        if key not in CONFIG_KEYS[""]:
            raise ConfigError(f"{path}: unknown key {key!r} (known: {', '.join(sorted(CONFIG_KEYS['']))})")
        tables = value if isinstance(value, list) else [value]
        if key in ("sources", "hub") and not isinstance(value, list):
            raise ConfigError(f"{path}: {key!r} must be an array of tables ([[{key}]])")
        for i, table in enumerate(tables):
            if key in ("sources", "hub", "schedule", "iceberg", "storage", "executor") and not isinstance(table, dict):
                raise ConfigError(f"{path}: {key!r} must hold tables")
            for inner in table if isinstance(table, dict) and key in CONFIG_KEYS else []:
                if inner not in CONFIG_KEYS[key]:
                    where = f"{key}[{i}]" if isinstance(value, list) else key
                    raise ConfigError(
                        f"{path}: unknown key {inner!r} in {where} (known: {', '.join(sorted(CONFIG_KEYS[key]))})"
                    )


# -- what the warehouse remembers ---------------------------------------------------------------------


def recorded_form(source: Source, warehouse_root: Path) -> dict[str, Any]:
    """How a build record stores a source: its path relative to the warehouse (so a warehouse moved
    together with its sources still finds them) and absolute (so one moved alone does too); an
    ``s3://`` source by its URL; the options it sets, if any."""
    options = {"options": source.option_values} if source.options else {}
    if source.url:
        return {"name": source.name, "kind": source.kind, "path": source.url, "absolute": source.url,
                "url": source.url} | options
    return {
        "name": source.name,
        "kind": source.kind,
        "path": Path(os.path.relpath(source.path, warehouse_root)).as_posix(),
        "absolute": str(source.path),
    } | options


def from_recorded(entry: dict[str, Any], warehouse_root: Path, storage: StoreOptions | None = None) -> Source:
    if entry.get("url"):
        return make_source(entry["name"], entry["kind"], entry["url"], None, storage, entry.get("options"))
    relative = (warehouse_root / entry["path"]).resolve()
    path = relative if relative.exists() or not Path(entry.get("absolute", "")).exists() else Path(entry["absolute"])
    return Source(entry["name"], entry["kind"], path, options=tuple(entry.get("options", {}).items()))


def option_specs(sources: list[Source]) -> list[str]:
    """The options ``sources`` set, as ``NAME.OPTION=JSON`` strings: how a Dagster resource, whose
    sources are ``NAME:KIND=PATH`` specs, carries them (:func:`with_option_specs`)."""
    return [f"{s.name}.{name}={json.dumps(value)}" for s in sources for name, value in s.option_values.items()]


def with_option_specs(sources: list[Source], specs: list[str]) -> list[Source]:
    """``sources`` with the options ``specs`` (:func:`option_specs`) set on the source each names."""
    given: dict[str, dict[str, Any]] = {}
    for spec in specs:
        left, _, value = spec.partition("=")
        name, _, option = left.rpartition(".")
        given.setdefault(name, {})[option] = json.loads(value)
    return [Source(s.name, s.kind, s.path, s.url, tuple(given[s.name].items())) if s.name in given else s
            for s in sources]


def sample_sources(warehouse_root: Path) -> list[Source]:
    """The embedded default corpus and the predictions of two simulated attribution methods over it
    (generated into the warehouse when first needed: ``sample.ensure.ensure_sample_corpus``)."""
    from pipelines.sample.predictions import METHODS

    predictions = warehouse_root / "corpus-predictions"
    return [Source(SAMPLE_SOURCE, "memtracebench", warehouse_root / "corpus"),
            *(Source(method, "memtrace_attribution", predictions / method) for method in METHODS)]


ADDED_SOURCES = "added-sources.json"  # sources recorded outside a build (tracehouse collect's landing folder)


def added_sources(warehouse_root: Path) -> list[dict[str, str]]:
    """Sources recorded in the warehouse by something other than a committed build (``tracehouse
    collect`` records its landing folder at once, also in a warehouse never built), in the form a
    build record keeps them (:func:`recorded_form`)."""
    path = warehouse_root / ADDED_SOURCES
    try:
        entries = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read the warehouse's added sources: {exc}") from None
    if not isinstance(entries, list) or not all(isinstance(e, dict) and {"name", "kind", "path"} <= set(e)
                                                  for e in entries):
        raise ConfigError(f"{path}: expected a list of sources with name, kind and path")
    return entries


def add_source(source: Source, warehouse_root: Path) -> None:
    """Record ``source`` in the warehouse now (not waiting for a build): the next build without
    --source, ``tracehouse watch`` and the Dagster sensor read it with the sources of the last
    committed build. Written atomically (a temporary file renamed over the old one, both fsynced)."""
    entries = [e for e in added_sources(warehouse_root) if e["name"] != source.name]
    entries.append(recorded_form(source, warehouse_root))
    _write_durably(warehouse_root / ADDED_SOURCES, json.dumps(entries, indent=2).encode() + b"\n")


def forget_added(names: list[str] | tuple[str, ...], warehouse_root: Path) -> None:
    """Drop added sources by name (``build --remove-source``): they would otherwise come back."""
    entries = added_sources(warehouse_root)
    kept = [e for e in entries if e["name"] not in names]
    if len(kept) != len(entries):
        _write_durably(warehouse_root / ADDED_SOURCES, json.dumps(kept, indent=2).encode() + b"\n")


def _write_durably(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def with_added(recorded: list[dict[str, str]] | None, warehouse_root: Path) -> list[dict[str, str]] | None:
    """The last committed build's sources and, after them, the added ones it does not hold yet
    (None when there are neither: a warehouse with nothing recorded)."""
    added = [e for e in added_sources(warehouse_root) if not any(r["name"] == e["name"] for r in recorded or [])]
    return [*(recorded or []), *added] if recorded or added else None


def generated_paths(sources: list[Source], warehouse_root: Path) -> set[Path]:
    """The sample corpus and simulated predictions a build generates into the warehouse when missing:
    a source there that does not exist yet is not a missing one."""
    corpus, predictions = warehouse_root / "corpus", warehouse_root / "corpus-predictions"
    return {corpus, *(s.path for s in sources if s.path.parent == predictions)}


def refuse_missing(sources: list[Source], generated: set[Path]) -> None:
    """Refuse (SourceUnavailable) a local source whose path does not exist (a build would read it as
    emptied), unless the build generates it."""
    for s in sources:
        if not s.url and s.path not in generated and not s.path.exists():
            raise SourceUnavailable(f"source {s.name}: {s.path} does not exist (restore it, give its new place with "
                                    f"--source {s.name}:{s.kind}=PATH, or drop it with --remove-source {s.name})")


def refuse_before_building(settings: Settings, remove: list[str] | tuple[str, ...] = ()) -> None:
    """Say the refusals a build decides from the command line, tracehouse.toml and the warehouse's
    records alone (a --remove-source naming no source, a recorded source the given ones leave out, a
    source whose path is gone) before ``tracehouse build`` imports Dagster and Great Expectations: the
    same ConfigError the build would raise, read-only and without its lock (the build decides again
    under it). A damaged latest record raises DamagedRecord. A warehouse on object storage is left to
    the build, whose records come from the store."""
    if settings.remote:
        return
    from pipelines.storage.records import latest_record
    from pipelines.storage.state import sources_to_read
    from pipelines.storage.warehouse import Warehouse

    warehouse = Warehouse(settings.warehouse)
    recorded, _ = sources_to_read(warehouse, latest_record(warehouse.builds_dir), bool(settings.sources))
    sources_for_build(settings, recorded, warehouse.root, remove)


def sources_for_build(settings: Settings, recorded: list[dict[str, str]] | None, warehouse_root: Path,
                      remove: list[str] | tuple[str, ...] = ()) -> list[Source]:
    """The sources a build reads (:func:`resolve_sources`), refusing a local one whose path is gone
    unless the build generates it (:func:`refuse_missing`)."""
    sources = resolve_sources(settings.sources, recorded, warehouse_root, remove, settings.storage)
    refuse_missing(sources, generated_paths(sources, warehouse_root))
    return sources


def resolve_sources(
    given: list[Source],
    recorded: list[dict[str, str]] | None,
    warehouse_root: Path,
    remove: list[str] | tuple[str, ...] = (),
    storage: StoreOptions | None = None,
) -> list[Source]:
    """The sources a build reads. ``given``: from the command line or tracehouse.toml (may be empty);
    ``recorded``: the last committed build's (None: no build yet), to which the sources added since
    (:func:`added_sources`) are joined. Refuses (ConfigError) to drop a recorded source that
    ``remove`` does not name."""
    recorded = with_added(recorded, warehouse_root) or []
    names = [r["name"] for r in recorded]
    for name in remove:
        if name not in names:
            known = ", ".join(names) or "none"
            raise ConfigError(f"--remove-source {name}: the warehouse has no source named {name!r} (recorded: {known})")
        if any(s.name == name for s in given):
            raise ConfigError(f"--remove-source {name}: {name!r} is also given as a --source; keep one of the two")
    kept = [r for r in recorded if r["name"] not in remove]
    if given:
        missing = [r for r in kept if not any(s.name == r["name"] for s in given)]
        if missing:
            specs = " ".join(f"--source {r['name']}:{r['kind']}={r['absolute']}" for r in missing)
            drops = " ".join(f"--remove-source {r['name']}" for r in missing)
            raise ConfigError(
                f"the warehouse also holds source(s) {', '.join(r['name'] for r in missing)}, which this build "
                f"does not name: building without them would delete their rows. Name them too ({specs}), "
                f"or drop them on purpose ({drops}), or give no --source to rebuild the recorded ones."
            )
        return given
    if kept:
        return [from_recorded(r, warehouse_root, storage) for r in kept]
    if recorded:
        raise ConfigError("--remove-source would leave the warehouse without sources; give the new ones with --source")
    return sample_sources(warehouse_root)
