"""What a build record is: the data of one committed warehouse state, and nothing that reads or
writes it (pipelines.storage.state keeps the log of records; pipelines.storage.remote carries them to a store).

A record names every file of one consistent state: the generation of each table partition, the file
of each mart, the dashboard and validation files, the checks' results and the sources it was built
from. Kept apart from the log so that the object-store layer, which uploads a record's files, needs
no part of the log that calls it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pipelines.errors import DamagedRecord

MANIFEST = "manifest.json"  # in each generation folder: what it was made from (its files, format, claims)
GENERATION_TABLE = "ingest_errors"  # the one table a generation writes whole, in its own folder

RECORD_FORMAT = 1


class CommitConflict(RuntimeError):
    """Another build committed first; this one's outputs were not published."""


@dataclass(frozen=True)
class PartitionState:
    """One table partition of a snapshot: the generation that holds its rows."""

    key: str
    source: str
    kind: str
    split: str
    generation: str  # relative to the warehouse root: tables/<key>/g-<id>
    fingerprint: str  # of the input files it was built from (pipelines.builds.changes)
    # The folders holding its rows (``tables/<key>/g-<id>/<n>``), each one data file per table: its own
    # and, by reference, unchanged ones of earlier generations of the partition (pipelines.builds.ingest).
    # Empty in records older than pieces: the generation folder holds one file per table.
    pieces: tuple[str, ...] = ()

    def files(self, table: str) -> list[str]:
        """The data files of ``table`` in this partition, relative to the warehouse root."""
        if table == GENERATION_TABLE or not self.pieces:
            return [f"{self.generation}/{table}.parquet"]
        return [f"{piece}/{table}.parquet" for piece in self.pieces]

    def folders(self) -> set[str]:
        """The generation folders this partition's files lie in (its own and those it refers to)."""
        return {self.generation} | {piece.rsplit("/", 1)[0] for piece in self.pieces}

    @property
    def manifest(self) -> str:
        return f"{self.generation}/{MANIFEST}"


@dataclass
class Snapshot:
    """The files of one warehouse state: table partitions and marts."""

    partitions: dict[str, PartitionState] = field(default_factory=dict)
    marts: dict[str, str] = field(default_factory=dict)  # mart -> its Parquet file

    def table_files(self, table: str) -> list[str]:
        return [f for key in sorted(self.partitions) for f in self.partitions[key].files(table)]

    def manifests(self) -> list[str]:
        return [self.partitions[key].manifest for key in sorted(self.partitions)]

    def tables_digest(self) -> str:
        """Names the table contents: equal digests, equal rows (generations are immutable)."""
        text = json.dumps(sorted((k, p.generation) for k, p in self.partitions.items()))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_json(self) -> dict[str, Any]:
        return {"partitions": {k: asdict(p) for k, p in sorted(self.partitions.items())}, "marts": dict(self.marts)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Snapshot:
        partitions = {k: PartitionState(**{**p, "pieces": tuple(p.get("pieces", ()))})
                      for k, p in data.get("partitions", {}).items()}
        return cls(partitions, dict(data.get("marts", {})))


@dataclass
class BuildRecord:
    """One committed build (see the module docstring)."""

    build: int
    parent: int | None
    attempt: str
    committed_at: str
    code: str  # fingerprint of the code that made the outputs
    inputs: str  # digest of code, sources and partition fingerprints: "nothing changed" compares it
    sources: list[dict[str, str]]
    snapshot: Snapshot
    checks: list[dict[str, Any]] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)  # step -> what it wrote (files, numbers)
    summary: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["snapshot"] = self.snapshot.to_json()
        return {"format": RECORD_FORMAT, **data}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BuildRecord:
        if data.get("format") != RECORD_FORMAT:
            raise ValueError(f"build record format {data.get('format')!r} is not {RECORD_FORMAT}")
        fields = {k: v for k, v in data.items() if k != "format"}
        fields["snapshot"] = Snapshot.from_json(fields["snapshot"])
        return cls(**fields)

    def files(self) -> set[str]:
        """Every file or folder this build refers to (relative paths), for garbage collection."""
        found = {f for p in self.snapshot.partitions.values() for f in p.folders()} | set(self.snapshot.marts.values())
        for output in self.outputs.values():
            found.update(output.get("files", []))
        return found

    @property
    def dashboard_page(self) -> str | None:
        return self.outputs.get("dashboard", {}).get("page")

    @property
    def report(self) -> str | None:
        return self.outputs.get("validation", {}).get("report")


# -- the records in their folder (``builds/<number>.json``): pipelines.storage.state.CommitLog commits them ----


def record_path(folder: Path, number: int) -> Path:
    return folder / f"{number:08d}.json"


def record_numbers(folder: Path) -> list[int]:
    """The numbers of the committed builds whose records are in ``folder``, in order."""
    if not folder.is_dir():
        return []
    return sorted(int(p.stem) for p in folder.glob("*.json") if p.stem.isdigit())


def read_record(folder: Path, number: int) -> BuildRecord:
    """Build ``number``'s record; LookupError when there is none, :class:`DamagedRecord` when it
    cannot be read as one."""
    path = record_path(folder, number)
    try:
        data = json.loads(path.read_bytes())
        if not isinstance(data, dict):
            raise ValueError(f"a JSON {type(data).__name__}, not an object")
        return BuildRecord.from_json(data)
    except FileNotFoundError:
        raise LookupError(f"build {number} is not in {folder}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise DamagedRecord(damaged_message(folder, number, exc)) from None


def damaged_message(folder: Path, number: int, exc: Exception) -> str:
    """What a damaged record means for the user: which file, why, and the builds that still open."""
    why = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc).splitlines()[0] if str(exc) else (
        type(exc).__name__)
    path = record_path(folder, number)
    earlier = [n for n in record_numbers(folder) if n < number]
    if earlier:
        way = (f"build {earlier[-1]} still opens (tracehouse sql --build {earlier[-1]}); to make it the latest "
               f"again, move {path.name} out of {folder} and build")
    else:
        way = f"no earlier build is kept: move {path.name} out of {folder} and build again"
    return f"the record of build {number}, {path}, is damaged ({why}): {way}"


def latest_record(folder: Path) -> BuildRecord | None:
    """The latest committed build's record in ``folder`` (the warehouse as readers see it), or None."""
    numbers = record_numbers(folder)
    return read_record(folder, numbers[-1]) if numbers else None
