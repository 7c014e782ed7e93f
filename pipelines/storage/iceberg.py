"""Every committed build as Apache Iceberg snapshots, so that any engine reading Iceberg reads the warehouse.

One Iceberg table per warehouse table (``pipelines.schema.TABLES``) and per mart, in one namespace
(``[iceberg] namespace``, default ``tracehouse``) of a SQL catalog: by default the SQLite file
``<warehouse>/iceberg/catalog.db``, or ``[iceberg] catalog``, a SQLAlchemy URL such as
``postgresql+psycopg2://user@host/db`` for a catalog several machines share (a password comes
from libpq's PGPASSWORD or ~/.pgpass, not the URL, which is written down in the warehouse). The
tables' metadata files are in ``<warehouse>/iceberg/``: on the store for a warehouse on object
storage, which needs a shared catalog. Each table's schema is its canonical Arrow schema (a
mart's: its Parquet file's) with the field ids every Parquet file of the warehouse is written with
(``storage.with_field_ids``: a column's id follows from its name, so it is the same in every file
and every schema version of its table, and is never reused). A table whose columns changed gets a
new schema version with those ids; a column whose type changed (no Iceberg schema change does that)
makes the table be made anew.

Nothing is copied: the data files of a table's snapshot *are* the build's own Parquet files
(registered as they are, columns matched by field id, statistics taken from the Parquet footers;
files written before the warehouse wrote field ids are matched by name through the table's name
mapping). Publishing build N gives every table one snapshot, in one catalog commit per
table that adds the files new in N, removes those no longer in it, sets the snapshot summary property
``tracehouse.build = N``, tags the snapshot ``build-N`` and expires the snapshots of builds the
warehouse no longer keeps (their files are deleted by ``state.collect_garbage``, which keeps the last
``state.KEEP_BUILDS`` builds: the tags of exactly those builds stay readable). When every table is
done, ``iceberg/builds/<N>.json`` names the snapshot of each table: one consistent build across tables.

Publication is idempotent and follows the build record (``commit.publish``): a table that already has
the tag ``build-N`` is skipped, so a publication killed half-way leaves each table at the previous build
or at the new one, and the next one completes it. Kept builds after the last fully published one
are published first, in order (a warehouse that just turned Iceberg on, or was moved: its Iceberg
metadata holds absolute paths, so a moved or copied warehouse gets a new catalog, made from its
kept builds).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines import schema
from pipelines.storage import remote
from pipelines.storage.records import BuildRecord
from pipelines.storage.state import KEEP_BUILDS, CommitLog
from pipelines.storage.warehouse import Warehouse, remove_tree, with_field_ids, write_atomic

if TYPE_CHECKING:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.table import Table

FOLDER = "iceberg"  # under the warehouse root: catalog.db, the tables' metadata, builds/
ENABLED = "enabled"  # the marker file in FOLDER: publication is on
NAMESPACE = "tracehouse"
BUILD_PROPERTY = "tracehouse.build"  # snapshot summary property: the build the snapshot is
TAG = "build-{}"
# A table whose current snapshot is read from this many manifests is made anew at its next publication
# (publish_table): pyiceberg 0.12 merges manifests only on appends, and every overwrite adds some.
MANIFEST_LIMIT = 12
TABLE_PROPERTIES = {
    # a commit deletes the table's older metadata.json files (tags, not those files, keep the history)
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "1",
}


def folder(warehouse: Warehouse) -> Path:
    return warehouse.root / FOLDER


def enabled(warehouse: Warehouse) -> bool:
    """Whether the warehouse publishes its builds as Iceberg snapshots (``tracehouse build --iceberg`` or
    ``[iceberg] enabled = true`` turned it on; it stays on until ``enabled = false`` or the folder goes)."""
    return (folder(warehouse) / ENABLED).is_file()


def set_enabled(warehouse: Warehouse, on: bool, catalog: str | None = None, namespace: str | None = None) -> None:
    """Turn the publication on (the next build, even one in which nothing changed, publishes the kept
    builds not yet published) or off (the catalog stays as it is). ``catalog`` (a SQLAlchemy URL, e.g.
    ``postgresql+psycopg2://host/db`` for a catalog several machines share) and ``namespace`` replace
    the ones the warehouse publishes to; None keeps them (default: the SQLite file ``iceberg/catalog.db``
    and namespace ``tracehouse``). A new catalog or namespace gets every kept build at the next build."""
    marker = folder(warehouse) / ENABLED
    if not on:
        marker.unlink(missing_ok=True)
        return
    current = _marker(warehouse)
    wanted = {"catalog": catalog or current.get("catalog"), "namespace": namespace or current.get("namespace")}
    require_extras(warehouse, wanted["catalog"])
    if not marker.is_file() or wanted != current:
        write_atomic(marker, json.dumps({"about": "tracehouse publishes every committed build as Iceberg snapshots "
                                         "(docs/SCALE.md)", **wanted}, indent=1))


def require_extras(warehouse: Warehouse, catalog: str | None = None) -> None:
    """Refuse, naming the extra, to publish without pyiceberg (or psycopg2 for a PostgreSQL catalog):
    asked before a build starts, not after its commit."""
    from pipelines import extras

    extras.require("iceberg", f"Iceberg publication of {warehouse.root}")
    uri = _with_driver(catalog) if catalog else catalog_uri(warehouse)
    if uri.startswith("postgresql"):
        extras.require("postgres", f"the Iceberg catalog {shown_uri(uri)}", ["psycopg2"])


def _marker(warehouse: Warehouse) -> dict[str, str | None]:
    try:
        data = json.loads((folder(warehouse) / ENABLED).read_text())
    except (OSError, ValueError):  # none, or the plain-text marker of earlier versions
        data = {}
    return {"catalog": data.get("catalog"), "namespace": data.get("namespace")} if isinstance(data, dict) else {}


def catalog_uri(warehouse: Warehouse) -> str:
    """The catalog the warehouse publishes to: ``[iceberg] catalog``, else ``iceberg/catalog.db``."""
    return _with_driver(_marker(warehouse).get("catalog") or default_uri(warehouse))


def _with_driver(uri: str) -> str:
    """A bare ``postgresql://`` URL as psycopg2's: SQLAlchemy 2.1 reads it as psycopg 3, not installed."""
    return re.sub(r"^postgres(ql)?://", "postgresql+psycopg2://", uri)


def namespace(warehouse: Warehouse) -> str:
    """The Iceberg namespace of the warehouse's tables: ``[iceberg] namespace``, else ``tracehouse``
    (each warehouse publishing to one shared catalog needs a namespace of its own)."""
    return _marker(warehouse).get("namespace") or NAMESPACE


def default_uri(warehouse: Warehouse) -> str:
    return f"sqlite:///{folder(warehouse) / 'catalog.db'}"


def home(warehouse: Warehouse) -> str:
    """The warehouse as published records name it: its store's URL for a warehouse on object storage
    (every working copy of it is the same warehouse), else its folder."""
    bound = remote.binding(warehouse.root)
    return bound["url"] if bound else str(warehouse.root)


def _places(warehouse: Warehouse) -> tuple[str, dict[str, str]]:
    """Where the tables' metadata files go (``<warehouse>/iceberg``, on the store for a warehouse on
    object storage) and the FileIO properties that reach the store (endpoint and region as the
    working copy was bound with, else the AWS variables; credentials from the AWS variables)."""
    bound = remote.binding(warehouse.root)
    if bound is None:
        return str(folder(warehouse)), {}
    options = remote.StoreOptions(bound.get("endpoint"), bound.get("region"))
    region = options.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    properties = {"s3.region": region or "us-east-1"}  # without one, pyiceberg asks AWS where the bucket is
    endpoint = options.endpoint_url
    if endpoint:
        properties["s3.endpoint"] = endpoint
    return f"{bound['url']}/{FOLDER}", properties


def _data_location(warehouse: Warehouse, rel: str) -> str:
    """A data file as the tables' manifests name it: its path, or its URL on the store."""
    bound = remote.binding(warehouse.root)
    return f"{bound['url']}/{rel}" if bound else str(warehouse.path(rel))


def shown_uri(uri: str) -> str:
    """A catalog URL as it may be written down: without its password."""
    from sqlalchemy.engine import make_url

    return make_url(uri).render_as_string(hide_password=True)


def tag(build: int) -> str:
    return TAG.format(build)


def open_catalog(warehouse: Warehouse, uri: str | None = None) -> SqlCatalog:
    """The warehouse's Iceberg catalog (:func:`catalog_uri` unless ``uri``; its tables and namespace
    are created when missing), with the warehouse's :func:`namespace`."""
    uri = _with_driver(uri) if uri else catalog_uri(warehouse)
    require_extras(warehouse, uri)
    from pyiceberg.catalog.sql import SqlCatalog

    folder(warehouse).mkdir(parents=True, exist_ok=True)
    location, properties = _places(warehouse)
    try:
        catalog = SqlCatalog(NAMESPACE, uri=uri, warehouse=location, **properties)
        if catalog.engine.dialect.name == "sqlite":
            _write_ahead(catalog.engine)
        catalog.create_namespace_if_not_exists(namespace(warehouse))
    except Exception as exc:  # noqa: BLE001 - a server that is down, a wrong URL: say which catalog
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RuntimeError(f"Iceberg catalog {shown_uri(uri)}: {first} (committed builds are published there once "
                           "it answers; [iceberg] enabled = false turns the publication off)") from exc
    return catalog


def _write_ahead(engine: Any) -> None:
    """SQLite in WAL mode with synchronous=NORMAL: a commit is not an fsync (which would be one per table
    and build) yet a killed process never loses one; :func:`_flush` makes a whole publication durable
    at once before it is recorded as done."""
    from sqlalchemy import event

    def configure(connection: Any, _record: Any) -> None:
        cursor = connection.cursor()
        cursor.execute("pragma journal_mode=wal")
        cursor.execute("pragma synchronous=normal")
        cursor.close()

    event.listen(engine, "connect", configure)
    engine.dispose()  # the connection the catalog opened to create its tables has neither


# -- what a build holds ------------------------------------------------------------------------------------


def build_tables(warehouse: Warehouse, record: BuildRecord) -> dict[str, tuple[pa.Schema, list[str]]]:
    """Each table and mart of ``record``: its Arrow schema and its data files (absolute paths, or URLs on
    the store for a warehouse on object storage)."""
    tables = {
        name: (arrow_schema, [_data_location(warehouse, f) for f in record.snapshot.table_files(name)])
        for name, arrow_schema in schema.TABLES.items()
    }
    for mart, rel in sorted(record.snapshot.marts.items()):
        tables[mart] = (pq.read_schema(warehouse.path(rel)).remove_metadata(), [_data_location(warehouse, rel)])
    return tables


def iceberg_schema(arrow_schema: pa.Schema) -> Any:
    """The Iceberg schema of a table whose files have ``arrow_schema``: their own field ids
    (``storage.with_field_ids``), names and types."""
    from pyiceberg.io.pyarrow import pyarrow_to_schema

    return pyarrow_to_schema(with_field_ids(arrow_schema))


# -- the record of a published build ---------------------------------------------------------------------


def _record_path(warehouse: Warehouse, build: int) -> Path:
    return folder(warehouse) / "builds" / f"{build:08d}.json"


def published(warehouse: Warehouse, build: int) -> dict[str, Any] | None:
    """``iceberg/builds/<build>.json`` ({"build", "root", "catalog", "namespace", "tables": {table: snapshot
    id}}) when build ``build`` is wholly published in this warehouse's catalog and namespace, else None."""
    try:
        data = json.loads(_record_path(warehouse, build).read_text())
    except (OSError, ValueError):
        return None
    catalog = shown_uri(catalog_uri(warehouse))  # records of earlier versions name none: the default file
    same = (data.get("root") == home(warehouse) and data.get("catalog", catalog) == catalog
            and data.get("namespace") == namespace(warehouse))
    return data if same else None


def snapshot_ids(warehouse: Warehouse, build: int) -> dict[str, int]:
    """The Iceberg snapshot of every table of build ``build``: read them together for one consistent build."""
    data = published(warehouse, build)
    if data is None:
        raise LookupError(f"build {build} is not published as Iceberg snapshots in {folder(warehouse)}")
    return data["tables"]


def _published_numbers(warehouse: Warehouse) -> list[int]:
    builds = folder(warehouse) / "builds"
    if not builds.is_dir():
        return []
    return sorted(int(p.stem) for p in builds.glob("*.json") if p.stem.isdigit() and published(warehouse, int(p.stem)))


def _moved(warehouse: Warehouse) -> bool:
    """The Iceberg folder was published for another root (a moved or copied warehouse): its metadata
    names the files of that root."""
    builds = folder(warehouse) / "builds"
    for path in builds.glob("*.json") if builds.is_dir() else ():
        with contextlib.suppress(OSError, ValueError):
            if json.loads(path.read_text()).get("root") != home(warehouse):
                return True
    return False


# -- publication -------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """pyiceberg warns for every column a Parquet footer has no statistics for (our long texts)."""
    logger = logging.getLogger("pyiceberg.io.pyarrow")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def publish(warehouse: Warehouse, record: BuildRecord, uri: str | None = None) -> dict[str, int]:
    """Publish ``record`` (the latest committed build) as one Iceberg snapshot per table, after every
    kept build not published yet; returns {table: snapshot id} of ``record``. Idempotent."""
    done = published(warehouse, record.build)
    if done is not None:
        return done["tables"]
    if uri is None and _moved(warehouse):  # a new catalog for this root, made from the kept builds
        chosen = _marker(warehouse)
        remove_tree(folder(warehouse))
        set_enabled(warehouse, True, chosen.get("catalog"), chosen.get("namespace"))
    log = CommitLog(warehouse)
    kept = [n for n in log.numbers()[-KEEP_BUILDS:] if n <= record.build] or [record.build]
    last = max(_published_numbers(warehouse), default=0)
    catalog = open_catalog(warehouse, uri)
    ids: dict[str, int] = {}
    try:
        with _quiet():
            for number in kept:
                if number <= last and number != record.build:
                    continue
                build = record if number == record.build else log.get(number)
                ids = _publish_build(warehouse, catalog, build, set(kept))
            _drop_other_tables(catalog, set(ids), namespace(warehouse))
    finally:
        catalog.close()
    for path in (folder(warehouse) / "builds").glob("*.json"):  # builds whose files are gone
        if path.stem.isdigit() and int(path.stem) not in kept:
            path.unlink(missing_ok=True)
    return ids


def _publish_build(warehouse: Warehouse, catalog: SqlCatalog, record: BuildRecord, kept: set[int]) -> dict[str, int]:
    space = namespace(warehouse)
    log = CommitLog(warehouse)

    @functools.cache
    def tables_of(number: int) -> dict[str, tuple[pa.Schema, list[str]]]:
        try:
            return build_tables(warehouse, log.get(number))
        except LookupError:  # not kept after all: that build's tag is not made again
            return {}

    ids = {
        name: publish_table(catalog, name, arrow_schema, files, record.build, kept, space,
                            earlier=lambda number, name=name: (tables_of(number).get(name) or (None, None))[1])
        for name, (arrow_schema, files) in build_tables(warehouse, record).items()
    }
    _flush(catalog)
    data = {"build": record.build, "root": home(warehouse), "catalog": shown_uri(catalog_uri(warehouse)),
            "namespace": space, "tables": ids}
    write_atomic(_record_path(warehouse, record.build), json.dumps(data, indent=1, sort_keys=True))
    return ids


def _flush(catalog: SqlCatalog) -> None:
    """Make the publication durable before it is recorded as done: the metadata files pyiceberg wrote
    (without an fsync each, like every file of a build: ``pipelines.storage.warehouse``), then SQLite's log."""
    os.sync()
    if catalog.engine.dialect.name == "sqlite":
        with catalog.engine.connect() as connection:
            connection.exec_driver_sql("pragma wal_checkpoint(truncate)")


def _load_or_create(catalog: SqlCatalog, name: str, arrow_schema: pa.Schema, space: str = NAMESPACE) -> Table:
    from pyiceberg.exceptions import NoSuchTableError

    identifier = (space, name)
    try:
        table = catalog.load_table(identifier)
    except NoSuchTableError:
        table = catalog.create_table(identifier, schema=iceberg_schema(arrow_schema), properties=TABLE_PROPERTIES)
    if not _under(table.location(), catalog):  # a table some other root registered
        _drop(catalog, table)
        table = catalog.create_table(identifier, schema=iceberg_schema(arrow_schema), properties=TABLE_PROPERTIES)
    return table


def _under(location: str, catalog: SqlCatalog) -> bool:
    return location.removeprefix("file://").startswith(catalog.properties["warehouse"].removeprefix("file://") + "/")


def publish_table(catalog: SqlCatalog, name: str, arrow_schema: pa.Schema, files: list[str], build: int,
                  kept: set[int], space: str = NAMESPACE,
                  earlier: Callable[[int], list[str] | None] | None = None) -> int:
    """Make table ``name`` hold exactly ``files`` in one snapshot of build ``build`` (tagged ``build-N``),
    expiring the snapshots of builds not in ``kept``. Returns the snapshot id.

    Only pyiceberg's public API: an overwrite that deletes the files no longer wanted and appends the new
    ones by reference (nothing is copied), tagged and expired in the same commit. An overwrite keeps the parent's
    manifests and adds its own, so a table rebuilt again and again would be read from more and more
    manifests: a table whose current snapshot has MANIFEST_LIMIT of them is made anew, from the kept
    builds before this one (``earlier``: a build's files of this table, None where it had none) and
    this one, so its metadata stays bounded whatever the number of builds (bench/iceberg_metadata.py)."""
    from pyiceberg.table import TableProperties

    table = _load_or_create(catalog, name, arrow_schema, space)
    if tag(build) in table.metadata.refs:  # published before (by a publication that was killed)
        return table.metadata.refs[tag(build)].snapshot_id
    wanted = iceberg_schema(arrow_schema)
    retyped = _retyped(table.metadata.schema(), wanted)  # no Iceberg schema change does that
    remade = retyped or _manifest_count(table) >= MANIFEST_LIMIT
    if remade:
        _drop(catalog, table)
        table = _load_or_create(catalog, name, arrow_schema, space)
    if table.metadata.schema().as_struct() != wanted.as_struct():  # new (create_table renumbers) or changed
        table = _set_schema(catalog, table, wanted)
    # files written before field ids: their columns are found by name
    properties = {**TABLE_PROPERTIES,
                  TableProperties.DEFAULT_NAME_MAPPING: table.metadata.schema().name_mapping.model_dump_json()}
    if any(table.metadata.properties.get(k) != v for k, v in properties.items()):
        table = table.transaction().set_properties(properties).commit_transaction()
    if remade and not retyped and earlier is not None:  # the kept builds' tags stay readable
        for number in sorted(n for n in kept if n < build):
            if (before := earlier(number)) is not None:
                table = _publish_files(table, before, number, kept)
    table = _publish_files(table, files, build, kept)
    return table.metadata.refs[tag(build)].snapshot_id


def _publish_files(table: Table, files: list[str], build: int, kept: set[int]) -> Table:
    """One catalog commit: a snapshot of ``table`` holding exactly ``files`` (the files it holds that
    ``files`` does not are deleted from it, the new ones appended with statistics from their Parquet
    footers), tagged ``build-N``; the tags of builds not in ``kept`` removed and the snapshots no tag
    holds expired (their manifests deleted after)."""
    from pyiceberg.io.pyarrow import parquet_file_to_data_file
    from pyiceberg.table.update.snapshot import ExpireSnapshots, ManageSnapshots

    wanted = list(dict.fromkeys(files))
    kept_files = set(wanted)
    live = {task.file.file_path: task.file for task in table.scan().plan_files()} if table.current_snapshot() else {}
    metadata = table.metadata  # nothing staged yet: the schema and spec the new files are read with
    transaction = table.transaction()
    with transaction.update_snapshot(snapshot_properties={BUILD_PROPERTY: str(build)}).overwrite() as overwrite:
        for path, data_file in live.items():
            if path not in kept_files:
                overwrite.delete_data_file(data_file)
        for path in wanted:
            if path not in live:
                overwrite.append_data_file(parquet_file_to_data_file(table.io, metadata, path))
    staged = transaction.table_metadata
    snapshot = staged.current_snapshot()
    assert snapshot is not None
    refs = ManageSnapshots(transaction).create_tag(snapshot.snapshot_id, tag(build))
    for ref in staged.refs:
        match = re.fullmatch(TAG.format(r"(\d+)"), ref)
        if match and int(match[1]) not in kept | {build}:
            refs.remove_tag(ref)
    refs.commit()
    staged = transaction.table_metadata
    protected = {ref.snapshot_id for ref in staged.refs.values()}
    expired = [s.snapshot_id for s in staged.snapshots if s.snapshot_id not in protected]
    if expired:
        ExpireSnapshots(transaction).by_ids(expired).commit()
    table = transaction.commit_transaction()
    if expired:
        _remove_unreferenced_metadata(table)
    return table


def _manifest_count(table: Table) -> int:
    snapshot = table.current_snapshot()
    return len(snapshot.manifests(table.io)) if snapshot else 0


def _retyped(current: Any, wanted: Any) -> bool:
    """Whether a column (by field id) has another type in ``wanted`` than in ``current``."""
    return any(i in current.field_ids and current.find_type(i) != wanted.find_type(i) for i in wanted.field_ids)


def _set_schema(catalog: SqlCatalog, table: Table, wanted: Any) -> Table:
    """Make ``wanted`` (with its own field ids, those of the data files) the table's current schema:
    pyiceberg's schema updates assign new ids themselves, so the new schema version is committed as is,
    through the catalog's public ``commit_table`` (guarded by the schema it replaces)."""
    from pyiceberg.schema import Schema
    from pyiceberg.table.update import AddSchemaUpdate, AssertCurrentSchemaId, SetCurrentSchemaUpdate

    schema_id = max(schema.schema_id for schema in table.metadata.schemas) + 1
    catalog.commit_table(table, (AssertCurrentSchemaId(current_schema_id=table.metadata.current_schema_id),),
                         (AddSchemaUpdate(schema=Schema(*wanted.fields, schema_id=schema_id)),
                          SetCurrentSchemaUpdate(schema_id=-1)))
    return table.refresh()


def _metadata_folder(table: Table) -> tuple[Any, str]:
    """The file system holding a table's metadata (local disk or the store, through the table's own
    FileIO) and the path of its folder there."""
    from pyiceberg.io.pyarrow import PyArrowFileIO

    scheme, netloc, path = PyArrowFileIO.parse_location(table.location())
    return table.io.fs_by_scheme(scheme, netloc), path.rstrip("/")


def _remove_unreferenced_metadata(table: Table) -> None:
    """Delete the manifest lists and manifests only expired snapshots used (pyiceberg's expiry leaves
    them), so that a warehouse rebuilt every minute does not pile up metadata files."""
    from pyarrow.fs import FileSelector
    from pyiceberg.io.pyarrow import PyArrowFileIO

    metadata = table.metadata
    live = {table.metadata_location, *(entry.metadata_file for entry in metadata.metadata_log)}
    for snapshot in metadata.snapshots:
        live.add(snapshot.manifest_list)
        live.update(manifest.manifest_path for manifest in snapshot.manifests(table.io))
    keep = {PyArrowFileIO.parse_location(path)[2] for path in live}
    fs, base = _metadata_folder(table)
    for info in fs.get_file_info(FileSelector(f"{base}/metadata", allow_not_found=True)):
        if info.path.endswith(".avro") and info.path not in keep:
            fs.delete_file(info.path)


def _drop(catalog: SqlCatalog, table: Table) -> None:
    """Drop a table from the catalog and delete its metadata (never its data files: the builds' own)."""
    catalog.drop_table(table.name())
    if _under(table.location(), catalog):
        fs, base = _metadata_folder(table)
        with contextlib.suppress(FileNotFoundError):
            fs.delete_dir(base)


def _drop_other_tables(catalog: SqlCatalog, names: set[str], space: str = NAMESPACE) -> None:
    """A mart the latest build no longer has is dropped (its earlier builds' tags with it)."""
    for identifier in catalog.list_tables(space):
        if identifier[-1] not in names:
            _drop(catalog, catalog.load_table(identifier))


# -- reading ------------------------------------------------------------------------------------------------


def read(warehouse: Warehouse, name: str, build: int | None = None, uri: str | None = None) -> pa.Table:
    """Rows of table or mart ``name`` as Iceberg has them: at the current snapshot, or at tag ``build-N``."""
    table = open_catalog(warehouse, uri).load_table((namespace(warehouse), name))
    scan = table.scan() if build is None else table.scan().use_ref(tag(build))
    return scan.to_arrow()
