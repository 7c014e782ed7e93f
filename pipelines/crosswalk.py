"""A team's own taxonomy crosswalk: the labels its platforms use (a Phoenix annotation's label, a
Langfuse score's value, an MLflow assessment's value), mapped onto the common failure categories
without editing the project's seed (sql/seeds/taxonomy_crosswalk.csv; docs/MARTS.md).

The file is ``taxonomy_crosswalk.csv`` beside the warehouse's config (the folder of
``tracehouse.toml`` or ``$TRACEHOUSE_CONFIG``; the working directory when there is none), with the
seed's columns. ``tracehouse build`` checks it and copies it into the warehouse root
(``crosswalk.csv``), where every connection to the warehouse (the build's marts and checks,
``tracehouse sql``, ``tracehouse.duckdb``) reads the seed's rows with the team's rows over them: a
team row whose (taxonomy, label) the seed has replaces that seed row, any other is added. A change
of the file changes the build's inputs and the marts' code, so the next build recomputes them.
"""

from __future__ import annotations

import csv
import hashlib
import io
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv

from pipelines import schema
from pipelines.errors import ConfigError
from pipelines.storage import Warehouse, write_atomic

USER_FILE = "taxonomy_crosswalk.csv"  # beside tracehouse.toml
WAREHOUSE_FILE = "crosswalk.csv"  # in the warehouse root: the crosswalk its builds and readers use
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


def digest(root: Path) -> str:
    """What the warehouse's crosswalk adds to the seed: '' without a team file (so a warehouse without
    one keeps its marts' and builds' digests), else the file's sha256."""
    path = warehouse_file(root)
    return hashlib.sha256(path.read_bytes()).hexdigest()[:32] if path else ""


def table(root: Path) -> pa.Table:
    """The crosswalk a connection to the warehouse at ``root`` holds: the seed's rows, a team row
    replacing the seed row of its (taxonomy, label), the other team rows after them."""
    seed = pacsv.read_csv(SEED)
    path = warehouse_file(root)
    if path is None:
        return seed
    team = read_rows(path)
    replaced = {(r["taxonomy"], r["label"]): r for r in team}
    rows = [replaced.pop((r["taxonomy"], r["label"]), r) for r in seed.to_pylist()]
    rows += [r for r in team if (r["taxonomy"], r["label"]) in replaced]
    return pa.Table.from_pylist([{c: r[c] for c in COLUMNS} for r in rows], schema=seed.schema)
