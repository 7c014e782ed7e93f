"""Did a partition's input change? One answer, used by the build, the sensor and the ingest.

A partition's files are fingerprinted by their paths, sizes and modification times (and the reader
kind and table format that turn them into rows): equal fingerprints mean the partition's rows would
come out the same, so its generation can be kept. The ingest goes one step further per file: a file
whose mtime moved but whose size and sha256 match is not parsed again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from pipelines import schema
from pipelines.readers.base import SourceFile

# Bumped whenever a schema changes, so generations of another format are never reused.
FORMAT_VERSION = "2:" + hashlib.sha256("".join(str(s) for s in schema.TABLES.values()).encode()).hexdigest()[:12]

FileEntry = tuple[str, int, int]  # (path relative to the source root, size, mtime in ns)


def file_entries(files: Iterable[SourceFile]) -> list[FileEntry]:
    """What a partition's files look like now, in path order."""
    entries = []
    for file in files:
        stat = file.path.stat()
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
