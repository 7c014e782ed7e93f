"""A team's own taxonomy crosswalk: the labels its platforms use (a Phoenix annotation's label, a
Langfuse score's value, an MLflow assessment's value), mapped onto the common failure categories
without editing the project's seed (sql/seeds/taxonomy_crosswalk.csv; docs/MARTS.md).

The file is ``taxonomy_crosswalk.csv`` beside the warehouse's config (the folder of
``tracehouse.toml`` or ``$TRACEHOUSE_CONFIG``; the working directory when there is none), with the
seed's columns. Every build (``tracehouse build``, a run Dagster starts) checks it and copies it into
the warehouse root (``crosswalk.csv``), where the build's connections (its marts and checks, the
Great Expectations value set of ``error_type``) read the seed's rows with the team's rows over them:
a team row whose (taxonomy, label) the seed has replaces that seed row, any other is added. The
commit keeps a copy its record names (``COMMITTED_DIR``), which readers of that build use
(``tracehouse sql``, ``tracehouse.duckdb``, a working copy of an ``s3://`` warehouse). A change of
the file changes the build's inputs, the marts' code and the suites' parameters, so the next build
recomputes and re-checks them.
"""

from __future__ import annotations

import csv
import hashlib
import io
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from pipelines import schema
from pipelines.errors import ConfigError
from pipelines.storage.warehouse import Warehouse, write_atomic

if TYPE_CHECKING:
    from pipelines.storage.records import BuildRecord
    from pipelines.storage.state import Attempt

USER_FILE = "taxonomy_crosswalk.csv"  # beside tracehouse.toml
WAREHOUSE_FILE = "crosswalk.csv"  # in the warehouse root: the crosswalk a build under way uses
# A committed build's crosswalk, by its content, among the files its record names (RECORD_OUTPUT):
# what a reader of that build uses, here or in a working copy of an s3:// warehouse elsewhere
COMMITTED_DIR = "marts/taxonomy_crosswalk"
RECORD_OUTPUT = "crosswalk"  # the record's output naming it ({"files": []}: the seed alone)
SEED = schema.SEEDS / "taxonomy_crosswalk.csv"
COLUMNS = ("taxonomy", "label", "canonical_label", "common_category", "note")
REQUIRED = ("taxonomy", "label", "canonical_label", "common_category")  # note may be empty


class CrosswalkError(ConfigError):
    """A team crosswalk file that cannot be read: the message names its file, line and column."""


def user_file(config_file: Path | None) -> Path:
    """Where a team's crosswalk is: beside ``config_file``, else in the working directory."""
    base = config_file.resolve().parent if config_file is not None else Path.cwd()
    return base / USER_FILE


def read_rows(path: Path, data: bytes | None = None) -> list[dict[str, str]]:
    """The rows of a team crosswalk, checked: the seed's columns (any order), a value in each required
    column, a known common category, each (taxonomy, label) once. Raises CrosswalkError."""
    raw = path.read_bytes() if data is None else data
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CrosswalkError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader, None)
    except csv.Error as exc:
        raise CrosswalkError(f"{path}, line {reader.line_num}: {exc}") from None
    if header is None:
        raise CrosswalkError(f"{path}: empty file; the first line names the columns {','.join(COLUMNS)}")
    header = [h.strip() for h in header]
    missing = [c for c in COLUMNS if c not in header]
    unknown = [h for h in header if h not in COLUMNS]
    doubled = sorted({h for h in header if header.count(h) > 1})
    if missing or unknown or doubled:
        what = "; ".join(part for part in (
            f"missing column(s) {', '.join(missing)}" if missing else "",
            f"unknown column(s) {', '.join(unknown)}" if unknown else "",
            f"column(s) named twice {', '.join(doubled)}" if doubled else "") if part)
        raise CrosswalkError(f"{path}, line 1 (header): {what}; the columns are the seed's: {','.join(COLUMNS)}")
    rows: list[dict[str, str]] = []
    seen: dict[tuple[str, str], int] = {}
    categories = set(schema.FAILURE_CATEGORIES)
    while True:
        try:
            fields = next(reader, None)
        except csv.Error as exc:
            raise CrosswalkError(f"{path}, line {reader.line_num}: {exc}") from None
        if fields is None:
            break
        line = reader.line_num
        if not any(f.strip() for f in fields):
            continue  # a blank line
        if len(fields) != len(header):
            raise CrosswalkError(f"{path}, line {line}: {len(fields)} fields, the header names {len(header)} "
                                 f"({','.join(header)})")
        row = {name: value.strip() for name, value in zip(header, fields, strict=True)}
        for name in REQUIRED:
            if not row[name]:
                raise CrosswalkError(f"{path}, line {line}, column {header.index(name) + 1} ({name}): empty")
        if row["common_category"] not in categories:
            raise CrosswalkError(
                f"{path}, line {line}, column {header.index('common_category') + 1} (common_category): "
                f"{row['common_category']!r} is not a common category (sql/seeds/failure_categories.csv: "
                f"{', '.join(schema.FAILURE_CATEGORIES)})")
        key = (row["taxonomy"], row["label"])
        if key in seen:
            raise CrosswalkError(f"{path}, line {line}: taxonomy {key[0]!r} label {key[1]!r} is also on line "
                                 f"{seen[key]}")
        seen[key] = line
        rows.append({name: row[name] for name in COLUMNS})
    return rows


def install(warehouse: Warehouse, config_file: Path | None) -> None:
    """Make the team crosswalk beside ``config_file`` (:func:`user_file`) the warehouse's: what every
    build does under its lock before it reads anything, ``tracehouse build`` and a run Dagster starts
    (UI, sensor, schedule) alike. Raises CrosswalkError for a malformed file."""
    install_user_file(warehouse, user_file(config_file))


def install_user_file(warehouse: Warehouse, path: Path) -> None:
    """Check the team crosswalk at ``path`` and make it the warehouse's (removed from the warehouse
    when there is none): called by a build under its lock, before anything is read."""
    target = warehouse.root / WAREHOUSE_FILE
    if not path.is_file():
        target.unlink(missing_ok=True)
        return
    data = path.read_bytes()
    read_rows(path, data)
    if not target.is_file() or target.read_bytes() != data:
        write_atomic(target, data)


def warehouse_file(root: Path) -> Path | None:
    path = root / WAREHOUSE_FILE
    return path if path.is_file() else None


def keep_for_commit(warehouse: Warehouse, attempt: Attempt) -> None:
    """Have the build's record name the crosswalk it was built with: the warehouse's file, kept under
    its content's digest in COMMITTED_DIR (never rewritten, like every file a record names), so that
    the commit of an s3:// warehouse uploads it with the build's other files and a working copy
    elsewhere downloads it with them (pipelines.storage.remote); without one the record names none."""
    path = warehouse_file(warehouse.root)
    files: list[str] = []
    if path is not None:
        data = path.read_bytes()
        rel = f"{COMMITTED_DIR}/{hashlib.sha256(data).hexdigest()[:32]}.csv"
        if not (warehouse.root / rel).is_file():
            write_atomic(warehouse.root / rel, data)
        files.append(rel)
    attempt.put_output(RECORD_OUTPUT, {"files": files})


def team_file(root: Path, record: BuildRecord | None = None) -> Path | None:
    """The team crosswalk a connection holds: the one ``record`` names (a committed build's), else
    the warehouse's (a build's steps; a record made before records named theirs)."""
    named = record.outputs.get(RECORD_OUTPUT) if record is not None else None
    if named is None:
        return warehouse_file(root)
    files = named.get("files") or []
    return root / files[0] if files else None


def labels(root: Path) -> list[str]:
    """Every label the crosswalk of the warehouse at ``root`` maps: the seed's, then the team's others
    (the value set of the ``error_type`` expectation, pipelines.validation.checks.parameters)."""
    path = warehouse_file(root)
    team = [row["label"] for row in read_rows(path)] if path is not None else []
    return list(dict.fromkeys([*schema.TAXONOMY_LABELS, *team]))


def digest(root: Path) -> str:
    """What the warehouse's crosswalk adds to the seed: '' without a team file (so a warehouse without
    one keeps its marts' and builds' digests), else the file's sha256."""
    path = warehouse_file(root)
    return hashlib.sha256(path.read_bytes()).hexdigest()[:32] if path else ""


def table(root: Path, seed: pa.Table, record: BuildRecord | None = None) -> pa.Table:
    """The crosswalk a connection to the warehouse at ``root`` (to ``record``'s build) holds: the
    ``seed``'s rows (as pipelines.analytics.db loads every seed), a team row replacing the seed row of its
    (taxonomy, label), the other team rows after them."""
    path = team_file(root, record)
    if path is None:
        return seed
    team = read_rows(path)
    replaced = {(r["taxonomy"], r["label"]): r for r in team}
    rows = [replaced.pop((r["taxonomy"], r["label"]), r) for r in seed.to_pylist()]
    rows += [r for r in team if (r["taxonomy"], r["label"]) in replaced]
    return pa.Table.from_pylist([{c: r[c] for c in COLUMNS} for r in rows], schema=seed.schema)
