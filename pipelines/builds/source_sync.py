"""Sources kept elsewhere, brought into their local mirror before a build lists them: the one place
that says how, by the source's URL and kind, for every caller (``tracehouse build``, a run Dagster
started, a fan-out step on another machine):

* ``s3://bucket/prefix`` (any kind): the objects whose ETag or size changed are downloaded
  (:func:`pipelines.storage.remote.sync_source`);
* ``http(s)://HOST:PORT/PROJECT`` (kind ``phoenix``): the project's spans and span annotations are
  saved from Phoenix's REST API (:func:`pipelines.readers.phoenix.snapshot`), a file rewritten only
  when its records changed, so the build's change detection sees what changed.

A source that cannot be reached stops the build (:class:`SourceUnreachable`, one line naming the
source and its URL); one that holds nothing now is refused when the committed build holds rows of it
(:class:`pipelines.config.SourceUnavailable`, as for an emptied folder), so it never empties the
warehouse's data of that source.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from pipelines.builds.plan import emptied_message, emptied_sources
from pipelines.config import HTTP_KINDS, ConfigError, Source, SourceUnavailable
from pipelines.progress import event
from pipelines.storage import remote
from pipelines.storage.records import PartitionState


class SourceUnreachable(RuntimeError):
    """A source's server could not be read: the message names the source, its URL and the reason."""


def sync_source(source: Source, storage: remote.StoreOptions, say: Callable[[str], None] = lambda _: None,
                only: Iterable[str] | None = None) -> remote.SyncResult:
    """Bring ``source`` (one with a ``url``) into its mirror, ``source.path``. ``only`` (keys under an
    s3:// URL: one partition's files, for a fan-out step) limits an s3:// sync to those objects; a
    Phoenix project is saved whole (its folder is one partition). Raises remote.EmptySource when it
    holds nothing, SourceUnreachable when its server does not answer."""
    if remote.is_url(source.url):
        synced = remote.sync_source(source.url, source.path, storage, say, only)
        say(event("source_synced", source=source.name, downloaded=synced.downloaded, kept=synced.kept,
                  deleted=synced.deleted))
        return synced
    if remote.is_http(source.url) and source.kind in HTTP_KINDS:
        from pipelines.readers import phoenix

        was = {path.name: path.stat().st_mtime_ns for path in _files(source)}
        try:
            saved = phoenix.snapshot(source.url, source.path)
        except phoenix.PhoenixUnavailable as exc:  # the reason on one line: the build's one error line
            raise SourceUnreachable(f"source {source.name}: {' '.join(str(exc).split())}; nothing was built "
                                    "from it, and the last committed build stands") from None
        if saved.spans == 0:
            raise remote.EmptySource(f"source {source.name}: the Phoenix project {source.url} holds no spans")
        now = {path.name: path.stat().st_mtime_ns for path in _files(source)}
        synced = remote.SyncResult(downloaded=sum(1 for name, mtime in now.items() if was.get(name) != mtime),
                                   deleted=sum(1 for name in was if name not in now))
        synced.kept = len(now) - synced.downloaded
        say(event("source_saved", source=source.name, url=source.url, spans=saved.spans,
                  annotations=saved.annotations, rewritten=synced.downloaded))
        return synced
    raise ConfigError(f"source {source.name}: a {source.kind} source cannot be synced from {source.url}")


def sync_sources(sources: Iterable[Source], storage: remote.StoreOptions, say: Callable[[str], None],
                 committed: dict[str, PartitionState], build: int | None) -> None:
    """Sync every source that has a URL (:func:`sync_source`), saying what each brought. One that
    holds nothing while the ``committed`` splits (of ``build``) hold rows of it is refused
    (SourceUnavailable): building would delete them."""
    for source in sources:
        if not source.url:
            continue
        try:
            sync_source(source, storage, say)
        except remote.EmptySource:
            if emptied := emptied_sources([source], {}, committed):
                raise SourceUnavailable(emptied_message(source, emptied[source.name], build)) from None
            raise


def _files(source: Source) -> list[Path]:
    return [path for path in source.path.iterdir() if path.is_file()] if source.path.is_dir() else []


def run_storage(warehouse_root: Path) -> remote.StoreOptions:
    """The store options of a run Dagster started, which has no tracehouse.toml settings of its own:
    the endpoint and region the warehouse's working copy was bound with (a local warehouse: none, so
    the AWS variables decide)."""
    bound = remote.binding(warehouse_root) or {}
    return remote.StoreOptions(bound.get("endpoint"), bound.get("region"))
