"""Object storage: a warehouse or a source at ``s3://bucket/prefix``.

The object store is where the warehouse *is*; the machine running a build keeps a local working
copy of it (under the cache folder, ``~/.cache/tracehouse/s3/<bucket>/<prefix>`` by default), builds
there as it would on a local warehouse, and commits by uploading:

1. every file the new build record names that the store lacks (names are unique and files are
   never rewritten, so "present" means "the same file"), then
2. the record itself, ``builds/<number>.json``, with a conditional PUT (``If-None-Match: *``): the
   one step that changes what readers see. If another build took the number first the PUT fails
   and this build is refused (:class:`pipelines.storage.records.CommitConflict`); nothing is renamed or linked.

A build killed at any moment leaves at most files no record names (removed by a later build once
they are older than :data:`ORPHAN_GRACE`, so a racing build's uploads are never taken from under
it). Before a build, and before ``tracehouse sql`` or ``show`` read, the working copy takes the
store's records and downloads the files of the latest one it lacks (:func:`pull`).

A source at ``s3://...`` is mirrored into the cache the same way (:func:`sync_source`); an object is
downloaded again only when its ETag or size changed, and its local modification time is the
object's, so the build's change detection sees exactly the objects that changed.

Credentials, region and endpoint come from the usual AWS variables (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``, ``AWS_ENDPOINT_URL``), or endpoint and region from
``[storage]`` in tracehouse.toml. The client is obstore (the Rust ``object_store`` crate).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from pipelines import extras
from pipelines.storage.records import BuildRecord, CommitConflict
from pipelines.storage.warehouse import write_atomic

SCHEME = "s3://"
HTTP_SCHEMES = ("http://", "https://")
REMOTE_FILE = ".remote.json"  # in a working copy: which store it is a copy of
ON_STORE = ".on-store.json"  # in a working copy: files a fan-out worker uploaded, not to upload again
TRANSFERS = 8  # objects moved at once: each request waits tens of ms on a real store, not on this machine
ORPHAN_GRACE = 3600.0  # seconds before an unreferenced object may be deleted (a racing build may own it)
DEFAULT_CACHE = Path("~/.cache/tracehouse")


class RemoteError(RuntimeError):
    """The object store could not be read or written (the message names the URL and the reason)."""


class EmptySource(RemoteError):
    """A source's prefix holds no objects: nothing is synced (and nothing deleted from its mirror)."""


def is_url(text: str | os.PathLike[str] | None) -> bool:
    return isinstance(text, str) and text.startswith(SCHEME)


@dataclass(frozen=True)
class StoreOptions:
    """Where the store answers (None: the AWS variables decide) and where working copies live."""

    endpoint: str | None = None
    region: str | None = None
    cache: Path | None = None

    @property
    def endpoint_url(self) -> str | None:
        """Where the store answers: ``endpoint``, else $AWS_ENDPOINT_URL, else None (AWS itself)."""
        return self.endpoint or os.environ.get("AWS_ENDPOINT_URL")

    @property
    def cache_root(self) -> Path:
        base = self.cache or Path(os.environ.get("TRACEHOUSE_CACHE", DEFAULT_CACHE))
        return base.expanduser().resolve()


def split_url(url: str) -> tuple[str, str]:
    """``s3://bucket/a/b/`` -> (``bucket``, ``a/b``)."""
    if not is_url(url):
        raise ValueError(f"{url!r} is not an s3:// URL")
    bucket, _, prefix = url[len(SCHEME):].partition("/")
    if not bucket:
        raise ValueError(f"{url!r} names no bucket")
    return bucket, prefix.strip("/")


def is_http(text: str | os.PathLike[str] | None) -> bool:
    """A source served over HTTP (a running Phoenix project: pipelines.builds.source_sync)."""
    return isinstance(text, str) and text.startswith(HTTP_SCHEMES)


def local_copy(url: str, options: StoreOptions) -> Path:
    """The working copy (or source mirror) of ``url`` under the cache folder; an http(s) source's
    snapshot under ``http/``, in a folder named after its URL and a digest of it (a URL may hold
    characters, or ``..``, that no folder name should)."""
    if is_http(url):
        url = url.rstrip("/")
        readable = re.sub(r"[^A-Za-z0-9_-]+", "_", url.split("://", 1)[1]).strip("_")[:80]
        return options.cache_root / "http" / f"{readable}-{hashlib.sha256(url.encode()).hexdigest()[:12]}"
    bucket, prefix = split_url(url)
    return options.cache_root / "s3" / bucket / (prefix or "_root")


@dataclass(frozen=True)
class ObjectInfo:
    size: int
    etag: str
    modified: float  # seconds since the epoch


class ObjectStore:
    """One bucket and prefix; keys are relative to the prefix, with forward slashes."""

    def __init__(self, url: str, options: StoreOptions | None = None) -> None:
        extras.require("s3", f"the object store {url}")
        from obstore.store import S3Store

        self.url = url.rstrip("/")
        bucket, prefix = split_url(url)
        options = options or StoreOptions()
        config: dict[str, str] = {}
        endpoint = options.endpoint_url
        if endpoint:
            config["endpoint"] = endpoint
        if options.region:
            config["region"] = options.region
        client = {"allow_http": True} if endpoint and endpoint.startswith("http://") else {}
        self.store = S3Store(bucket, prefix=prefix or None, config=config, client_options=client)

    def list(self, prefix: str = "") -> dict[str, ObjectInfo]:
        import obstore
        from obstore.exceptions import BaseError

        found: dict[str, ObjectInfo] = {}
        try:
            for batch in obstore.list(self.store, prefix=prefix or None, chunk_size=1000):
                for meta in batch:
                    if not meta["path"].endswith("/"):
                        found[meta["path"]] = ObjectInfo(meta["size"], str(meta["e_tag"] or "").strip('"'),
                                                         meta["last_modified"].timestamp())
        except BaseError as exc:  # no such bucket, no credentials, no answer: say which store
            raise RemoteError(f"{self.url}: cannot list objects: {str(exc).splitlines()[0][:300]}") from None
        return found

    def download(self, key: str, path: Path, modified: float | None = None) -> None:
        """``key`` into ``path`` (atomically), with the object's modification time when given."""
        import obstore

        def fetch(tmp: Path) -> None:
            with tmp.open("wb") as out:
                for chunk in obstore.get(self.store, key).stream(min_chunk_size=8 << 20):
                    out.write(chunk)

        write_atomic(path, fetch)
        if modified is not None:
            os.utime(path, (modified, modified))

    def upload(self, path: Path, key: str) -> None:
        import obstore

        obstore.put(self.store, key, path)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Create ``key`` unless it exists (a conditional PUT, ``If-None-Match: *``); False if it did."""
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        try:
            obstore.put(self.store, key, data, mode="create")
        except (AlreadyExistsError, PreconditionError):
            return False
        return True

    def get(self, key: str) -> bytes:
        import obstore

        return bytes(obstore.get(self.store, key).bytes())

    def size(self, key: str) -> int | None:
        """The size of one object (a HEAD request), or None when there is none."""
        import obstore
        from obstore.exceptions import NotFoundError

        try:
            return int(obstore.head(self.store, key)["size"])
        except (NotFoundError, FileNotFoundError):
            return None

    def delete(self, keys: Iterable[str]) -> None:
        import obstore

        keys = list(keys)
        for start in range(0, len(keys), 1000):
            obstore.delete(self.store, keys[start:start + 1000])


def _each(function: Callable[..., None], calls: list[tuple]) -> None:
    """Run ``function(*args)`` for every tuple in ``calls``, TRANSFERS at a time; the first error raises."""
    if len(calls) <= 1:
        for args in calls:
            function(*args)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=TRANSFERS, thread_name_prefix="s3") as pool:
        for future in [pool.submit(function, *args) for args in calls]:
            future.result()


# -- a working copy's binding to its store ----------------------------------------------------------


def bind(root: Path, url: str, options: StoreOptions) -> None:
    """Remember in the working copy which store it copies (every process opening it then knows)."""
    wanted = {"url": url.rstrip("/"), "endpoint": options.endpoint, "region": options.region}
    path = root / REMOTE_FILE
    try:
        if json.loads(path.read_text()) == wanted:
            return
    except (OSError, ValueError):
        pass
    write_atomic(path, json.dumps(wanted))


def binding(root: Path) -> dict[str, str | None] | None:
    """What :func:`bind` wrote for the working copy at ``root`` (url, endpoint, region), or None
    for a local warehouse."""
    try:
        data = json.loads((root / REMOTE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("url") else None


def store_of(root: Path) -> ObjectStore | None:
    """The store a working copy at ``root`` copies, or None for a local warehouse."""
    data = binding(root)
    if data is None:
        return None
    return ObjectStore(data["url"], StoreOptions(data.get("endpoint"), data.get("region")))


# -- warehouse: pull before, push at the commit ------------------------------------------------------


def _record_key(number: int) -> str:
    return f"builds/{number:08d}.json"


def pull(root: Path, say: Callable[[str], None] = lambda _: None, build: int | None = None, *,
         prune: bool = False) -> int | None:
    """Bring the working copy up to the store: the store's build records, and the files of the
    latest one (or of ``build``) it lacks. ``prune`` (only under the build lock): remove local records
    the store does not hold (the store was reset; a commit never leaves one, as it writes the store
    first). Returns the latest committed build number, or None."""
    store = store_of(root)
    if store is None:
        return None
    builds = root / "builds"
    remote = {int(Path(k).stem): k for k in store.list("builds/") if Path(k).stem.isdigit()}
    builds.mkdir(parents=True, exist_ok=True)
    for path in builds.glob("*.json") if prune else []:
        if path.stem.isdigit() and int(path.stem) not in remote:
            path.unlink()
    for key in remote.values():
        path = builds / Path(key).name
        if not path.is_file():
            write_atomic(path, store.get(key))
    if not remote:
        return None
    latest = max(remote)
    wanted_build = build if build in remote else latest
    record = json.loads((builds / Path(remote[wanted_build]).name).read_text())
    fetch(root, _record_files(record), say, f" of build {wanted_build}", store)
    return latest


def fetch(root: Path, rels: Iterable[str], say: Callable[[str], None] = lambda _: None, what: str = "",
          store: ObjectStore | None = None) -> int:
    """Download the files and generation folders ``rels`` (relative to the warehouse) that the working
    copy at ``root`` lacks, saying so (``what``: e.g. " of build 7"); a generation arrives whole (into a
    temporary folder, then renamed, as a build writes one). Returns how many files were downloaded."""
    store = store or store_of(root)
    if store is None:
        return 0
    missing: list[tuple[str, ObjectInfo | None]] = []
    for rel in sorted(rels):
        local = root / rel
        if local.is_file() or (local.is_dir() and any(local.iterdir())):
            continue  # files are never rewritten: present is the same (a folder is written whole, then renamed)
        if Path(rel).suffix:
            missing.append((rel, None))
        else:  # a generation folder: one listing of its files
            missing.extend(store.list(f"{rel}/").items())
    if missing:
        say(f"downloading {len(missing)} files{what} from {store.url}")
        staged: dict[Path, Path] = {}
        calls = []
        for key, _ in missing:
            folder = _generation_of(key, root)
            if folder is None:
                calls.append((key, root / key))
            else:  # into a temporary folder renamed whole, as a build writes a generation
                tmp = staged.setdefault(folder, folder.with_name(f".{folder.name}.download"))
                calls.append((key, tmp / (root / key).relative_to(folder)))
        _each(store.download, calls)
        total = sum(path.stat().st_size for _, path in calls)
        for folder, tmp in staged.items():
            tmp.rename(folder)
        say(f"downloaded {len(missing)} files ({total / 1e6:.1f} MB)")
    return len(missing)


def upload(root: Path, rels: Iterable[str]) -> int:
    """Upload the files and folders ``rels`` of the working copy at ``root`` to its store (a fan-out
    worker's generation and mart fragments, before any build record names them). Returns how many."""
    store = store_of(root)
    if store is None:
        return 0
    files = [p for rel in sorted(set(rels)) for p in _files_under(root / rel)]
    _each(store.upload, [(path, path.relative_to(root).as_posix()) for path in files])
    return len(files)


def push(root: Path, record: BuildRecord, body: bytes, parent: BuildRecord | None = None,
         say: Callable[[str], None] = lambda _: None) -> None:
    """Upload the files ``record`` names that its ``parent``'s record (the committed build it follows,
    if the caller has it) does not (every other one is in the store already: the parent's commit
    uploaded it), then create its build record there (``body``, the bytes of the local record) with a
    conditional PUT. Raises CommitConflict if the number is taken. No listing: a commit costs one PUT
    per new file and one conditional PUT, however large the warehouse."""
    store = store_of(root)
    if store is None:
        return
    wanted = record.files()
    if parent is not None:
        wanted -= parent.files()
    wanted -= _still_on_store(store, root, wanted & _noted(root))
    uploads = [p for rel in sorted(wanted) for p in _files_under(root / rel)]
    if uploads:
        total = sum(p.stat().st_size for p in uploads)
        say(f"commit: uploading {len(uploads)} files ({total / 1e6:.1f} MB) to {store.url}")
        _each(store.upload, [(path, path.relative_to(root).as_posix()) for path in uploads])
    if not store.put_if_absent(_record_key(record.build), body):
        raise CommitConflict(
            f"build {record.build} was committed to {store.url} by another build while this one ran; run it again"
        )
    (root / ON_STORE).unlink(missing_ok=True)


def note_on_store(root: Path, rels: Iterable[str]) -> None:
    """Remember that ``rels`` (generations and mart fragments a fan-out worker uploaded, then fetched
    here) are on the store already, so the commit need not upload them again (it checks first)."""
    write_atomic(root / ON_STORE, json.dumps(sorted(_noted(root) | set(rels))))


def _noted(root: Path) -> set[str]:
    try:
        return set(json.loads((root / ON_STORE).read_text()))
    except (OSError, ValueError):
        return set()


def _still_on_store(store: ObjectStore, root: Path, rels: set[str]) -> set[str]:
    """Those of ``rels`` whose every file is on the store with its local size (a listing per folder, a
    HEAD per file: an uncommitted upload may have been collected as an orphan since)."""
    present = set()
    for rel in rels:
        local = {p.relative_to(root).as_posix(): p.stat().st_size for p in _files_under(root / rel)}
        if (root / rel).is_dir():
            listed = {key: info.size for key, info in store.list(f"{rel}/").items()}
        else:
            listed = {rel: store.size(rel)}
        if local and all(listed.get(key) == size for key, size in local.items()):
            present.add(rel)
    return present


def _generation_of(key: str, root: Path) -> Path | None:
    """The generation folder ``tables/<partition>/g-<id>`` a key lies in, or None."""
    parts = key.split("/")
    return root.joinpath(*parts[:3]) if len(parts) > 3 and parts[0] == "tables" else None


def publish_copies(root: Path, rels: Iterable[str]) -> None:
    """Overwrite the store's convenience copies (dashboards/index.html, reports/validation.html)."""
    store = store_of(root)
    if store is None:
        return
    for rel in rels:
        if (root / rel).is_file():
            store.upload(root / rel, rel)


def collect_garbage(root: Path, keep: int, now: float | None = None) -> int:
    """Delete objects none of the last ``keep`` records names, once older than ORPHAN_GRACE (a
    build still running elsewhere may have uploaded them and not committed yet), and the records of
    the builds before those ``keep`` (a commit only ever adds a higher number). Returns how many."""
    store = store_of(root)
    if store is None:
        return 0
    now = time.time() if now is None else now
    objects = store.list()
    numbers = sorted(int(Path(k).stem) for k in objects if k.startswith("builds/") and Path(k).stem.isdigit())
    wanted: set[str] = set()
    for number in numbers[-keep:]:
        wanted |= _record_files(json.loads(store.get(_record_key(number))))
    data = ("tables/", "marts/", "dashboards/charts/", "dashboards/failures/", "dashboards/drilldown/",
            "dashboards/page-", "reports/validation-")
    doomed = [key for key, info in objects.items()
              if key.startswith(data) and not _named(key, wanted) and now - info.modified > ORPHAN_GRACE]
    doomed += [_record_key(number) for number in numbers[:-keep]]
    store.delete(doomed)
    return len(doomed)


def _record_files(record: dict) -> set[str]:
    return BuildRecord.from_json(record).files()


def _named(key: str, wanted: set[str]) -> bool:
    """Is ``key`` one of ``wanted`` or inside one of its folders?"""
    if key in wanted:
        return True
    parts = key.split("/")
    return any("/".join(parts[:i]) in wanted for i in range(1, len(parts)))


def _files_under(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else []


def _same_size(path: Path, size: int) -> bool:
    try:
        return path.stat().st_size == size
    except OSError:
        return False


# -- sources: a mirror kept by ETag and size -----------------------------------------------------------


@dataclass
class SyncResult:
    downloaded: int = 0
    kept: int = 0
    deleted: int = 0
    bytes: int = 0


def sync_source(url: str, mirror: Path, options: StoreOptions, say: Callable[[str], None] = lambda _: None,
                only: Iterable[str] | None = None) -> SyncResult:
    """Make ``mirror`` hold the objects under ``url``: download those whose ETag or size differ from
    the last sync (or that are new), delete those gone; the rest are not touched. With ``only`` (keys
    under ``url``: the files of one partition, for a fan-out worker), just those objects, listed
    under their common folder, and nothing is deleted."""
    store = ObjectStore(url, options)
    index_path = options.cache_root / "index" / f"{hashlib.sha256(url.encode()).hexdigest()[:24]}.json"
    try:
        index: dict[str, list] = json.loads(index_path.read_text())
    except (OSError, ValueError):
        index = {}
    wanted = None if only is None else set(only)
    if wanted is None:
        objects = store.list()
    else:
        folder = os.path.commonpath([f"/{key}" for key in wanted]).strip("/") if wanted else ""
        folder = folder if folder and folder not in wanted else folder.rpartition("/")[0]
        objects = {k: v for k, v in store.list(f"{folder}/" if folder else "").items() if k in wanted}
    if not objects:
        raise EmptySource(f"source {url} holds no objects" + (" of those asked for" if wanted is not None else ""))
    result = SyncResult()
    changed = [(key, info) for key, info in sorted(objects.items())
               if index.get(key) != [info.etag, info.size] or not _same_size(mirror / key, info.size)]
    if changed:
        total = sum(info.size for _, info in changed)
        say(f"{url}: downloading {len(changed)} changed of {len(objects)} objects ({total / 1e6:.1f} MB)")
    _each(store.download, [(key, mirror / key, info.modified) for key, info in changed])
    for key, info in changed:
        index[key] = [info.etag, info.size]
        result.downloaded += 1
        result.bytes += info.size
    for key in [k for k in index if k not in objects and wanted is None]:
        (mirror / key).unlink(missing_ok=True)
        del index[key]
        result.deleted += 1
    result.kept = len(objects) - result.downloaded
    write_atomic(index_path, json.dumps(index, sort_keys=True))
    return result
