"""Did a partition's input change? One answer, used by the build, the sensor and the ingest.

A partition's files are fingerprinted by their paths, sizes and modification times (and the reader
kind and table format that turn them into rows): equal fingerprints mean the partition's rows would
come out the same, so its generation can be kept. The ingest goes one step further per file: a file
whose mtime moved but whose size and sha256 match is not parsed again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from pipelines import schema
from pipelines.readers.base import SourceFile


def _format_version() -> str:
    """What every generation's rows are made by besides its files: the tables' schemas and the seeds
    the readers classify with (sql/seeds: systems, datasets, error types, agent roles, step rules).
    A change of either makes every generation another format, never reused: a rule edited in a
    seed re-reads the files it classifies (a kept generation would keep the old classes)."""
    digest = hashlib.sha256("".join(str(s) for s in schema.TABLES.values()).encode())
    for seed in sorted(schema.SEEDS.glob("*.csv")):
        digest.update(seed.name.encode() + b"\0" + seed.read_bytes())
    return "4:" + digest.hexdigest()[:12]


FORMAT_VERSION = _format_version()

FileEntry = tuple[str, int, int]  # (path relative to the source root, size, mtime in ns)


def file_entries(files: Iterable[SourceFile]) -> list[FileEntry]:
    """What a partition's files look like now, in path order."""
    entries = []
    for file in files:
        stat = file.stat()  # a broken link: size 0, mtime -1 (its target's disappearance is a change)
        entries.append((file.relpath, stat.st_size, stat.st_mtime_ns))
    return sorted(entries)


def fingerprint(kind: str, entries: Iterable[FileEntry], context: str = "") -> str:
    """The fingerprint of a partition read by reader ``kind`` from files ``entries``; ``context`` is
    whatever else its rows depend on (for a prediction source: the digest of the annotations its
    predictions are matched against)."""
    text = json.dumps([FORMAT_VERSION, kind, sorted(tuple(e) for e in entries), context])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def files_fingerprint(kind: str, files: Iterable[SourceFile], context: str = "") -> str:
    return fingerprint(kind, file_entries(files), context)


def partition_context(cases_digest: str = "", options: Mapping[str, Any] | None = None) -> str:
    """What a partition's rows depend on besides its files (a fingerprint's ``context``): the digest
    of the annotations a prediction or label source is matched against, and the reader options its
    source sets (pipelines.config.Source.options). A source that sets none keeps the context it had
    before options existed, so its generations are still kept."""
    if not options:
        return cases_digest
    digest = hashlib.sha256(json.dumps(dict(options), sort_keys=True, default=list).encode()).hexdigest()[:16]
    return f"{cases_digest}+options:{digest}"
