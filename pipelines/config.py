"""Sources and the warehouse location: declared once, shared by the CLI, the Dagster UI and schedules.

Resolution order: command-line flags, then ``tracehouse.toml`` (in the working directory, or
the file named by ``$TRACEHOUSE_CONFIG``), then the defaults (warehouse ``warehouse/``, the
embedded sample corpus as the only source)::

    warehouse = "warehouse"

    [[sources]]
    kind = "whowhen"                 # memtracebench | smartcomment | whowhen | tracertraj
    path = "../shared/data/whowhen"  # relative to this file
    # name = "whowhen"               # optional, defaults to the kind; must be unique

    [schedule]
    cron = "0 3 * * *"               # the daily full consistency pass

    [[hub]]                          # datasets the hub_revision_sensor keeps up to date
    kind = "memtracebench"
    dest = "data/memtracebench"      # point a [[sources]] entry at the same folder
    # repo_id = "zjunlp/MemTraceBench"; revision = "main"
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from pipelines.readers import READERS

CONFIG_FILE = "tracehouse.toml"
DEFAULT_WAREHOUSE = "warehouse"
DEFAULT_CRON = "0 3 * * *"
SAMPLE_SOURCE = "sample"


class ConfigError(ValueError):
    """A source or setting that cannot be used, said in words a user can act on."""


@dataclass(frozen=True)
class Source:
    name: str
    kind: str
    path: Path

    def __post_init__(self) -> None:
        if self.kind not in READERS:
            raise ConfigError(f"unknown source kind {self.kind!r}; use one of: {', '.join(sorted(READERS))}")
        if not re.fullmatch(r"[A-Za-z0-9_.\-]+", self.name):
            raise ConfigError(f"source name {self.name!r} may only hold letters, digits, '_', '.', '-'")


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

    @property
    def uses_sample(self) -> bool:
        return not self.sources


def parse_source(spec: str, base: Path | None = None) -> Source:
    """``KIND=PATH`` or ``NAME:KIND=PATH`` from the command line."""
    if "=" not in spec:
        raise ConfigError(f"--source needs KIND=PATH (or NAME:KIND=PATH), got {spec!r}")
    left, path = spec.split("=", 1)
    name, _, kind = left.rpartition(":")
    kind = kind.strip()
    return Source(name=name.strip() or kind, kind=kind, path=_resolve(path.strip(), base))


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
    elif config:
        raise ConfigError(f"config file {config_path} does not exist")
    base = config_path.resolve().parent if config_path.is_file() else Path.cwd()

    wh = warehouse or os.environ.get("TRACEHOUSE_WAREHOUSE")
    wh_path = Path(wh).resolve() if wh else _resolve(data.get("warehouse", DEFAULT_WAREHOUSE), base)

    if sources:
        resolved = [parse_source(spec) for spec in sources]
    else:
        resolved = []
        for i, item in enumerate(data.get("sources", [])):
            if not isinstance(item, dict) or "kind" not in item or "path" not in item:
                raise ConfigError(f"{config_path}: sources[{i}] needs 'kind' and 'path'")
            resolved.append(Source(item.get("name", item["kind"]), item["kind"], _resolve(item["path"], base)))
    names = [s.name for s in resolved]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise ConfigError(
            f"two sources named {sorted(duplicates)[0]!r}: give each a name with NAME:KIND=PATH"
        )
    for source in resolved if require_paths else []:
        if not source.path.exists():
            raise ConfigError(f"source {source.name}: {source.path} does not exist")
    cron = data.get("schedule", {}).get("cron", DEFAULT_CRON)
    hub = [
        HubSource(h["kind"], _resolve(h["dest"], base), h.get("repo_id"), h.get("revision", "main"))
        for h in data.get("hub", [])
    ]
    return Settings(wh_path, resolved, cron, config_path if config_path.is_file() else None, hub)
