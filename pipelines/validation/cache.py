"""Results of the Great Expectations suites per partition, kept in ``reports/.validation-cache``, so a
rebuild runs GX only where the columns a suite reads changed; the partitions GX must see are
validated together, a run per table and BATCH_ROWS rows (:func:`table_results`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipelines.storage.warehouse import Warehouse, write_atomic
from pipelines.validation.gx_runner import PartResult, Runner, run_partition, run_together, splittable, suite_rows

CACHE_DIR = ".validation-cache"
# Up to this many rows of a table are validated in one GX run, when several partitions need it: the
# run's fixed cost is paid once, and the frame GX is given stays bounded.
BATCH_ROWS = 500_000


class ResultCache:
    """Results of one suite over one partition's file: keyed by the content of the columns the suite
    reads (an edit of a column no expectation reads, or a rebuilt partition with the same rows, costs
    no GX run), found through the file's path, size and mtime (an unchanged file is not even read)."""

    def __init__(self, warehouse: Warehouse) -> None:
        self.folder = warehouse.reports_dir / CACHE_DIR

    @staticmethod
    def _name(*parts: Any) -> str:
        return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:32] + ".json"

    def file_key(self, digest: str, path: Path) -> str:
        stat = path.stat()
        return self._name("file", digest, path.as_posix(), stat.st_size, stat.st_mtime_ns)

    def content_key(self, digest: str, partition: str, data: pa.Table) -> str:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, data.schema) as writer:
            writer.write_table(data)
        content = hashlib.sha256(sink.getvalue()).hexdigest()
        return self._name("content", digest, partition, content)

    def get(self, name: str) -> Any:
        path = self.folder / name
        return json.loads(path.read_text()) if path.is_file() else None

    def put(self, name: str, value: Any) -> None:
        write_atomic(self.folder / name, json.dumps(value))

    def keep_only(self, used: set[str]) -> None:
        """Delete the results no partition of the build needs any more."""
        if self.folder.is_dir():
            for stale in self.folder.glob("*.json"):
                if stale.name not in used:
                    stale.unlink(missing_ok=True)


def suite_digest(doc: dict[str, Any], params: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps([doc, params], sort_keys=True).encode()).hexdigest()[:16]


def table_results(warehouse: Warehouse, table: str, doc: dict[str, Any], parts: Sequence[tuple[str, str]],
                  params: dict[str, Any], runner_of: Callable[[], Runner],
                  used: set[str] | None = None) -> list[list[PartResult]]:
    """The results of one suite over each of several partitions' files of a table (``parts``: (file,
    partition) pairs), each from the cache when the file, or the content of the columns the suite
    reads, was validated before; the others validated together, one GX run per BATCH_ROWS rows
    (``gx_runner.run_together``; each alone when GX fails that run), and kept per partition.
    ``used`` collects the cache entries read."""
    cache, digest = ResultCache(warehouse), suite_digest(doc, params)
    contents: list[str] = []
    waiting: list[tuple[str, str, str, pa.Table]] = []  # (file key, content key, partition, rows) GX must see

    def validate_waiting() -> None:
        partitions, datas = [w[2] for w in waiting], [w[3] for w in waiting]
        together = run_together(runner_of, table, datas, partitions, params) if len(waiting) > 1 else None
        if together is None:
            together = [run_partition(runner_of, table, data, partition, params)
                        for data, partition in zip(datas, partitions, strict=True)]
        for (by_file, content, _, _), results in zip(waiting, together, strict=True):
            cache.put(content, results)
            cache.put(by_file, content)
        waiting.clear()

    for rel, partition in parts:
        path = warehouse.path(rel)
        by_file = cache.file_key(digest, path)
        content = cache.get(by_file)
        if content is None or cache.get(content) is None:
            data = suite_rows(path, table, doc)
            content = cache.content_key(digest, partition, data)
            if cache.get(content) is not None:
                cache.put(by_file, content)
            else:
                if waiting and (not splittable(doc) or
                                sum(w[3].num_rows for w in waiting) + data.num_rows > BATCH_ROWS):
                    validate_waiting()
                waiting.append((by_file, content, partition, data))
        contents.append(content)
        if used is not None:
            used.update((by_file, content))
    if waiting:
        validate_waiting()
    return [cache.get(content) for content in contents]
