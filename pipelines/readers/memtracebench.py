"""Reader for MemTraceBench: split folders (rag/, mem0/, evermemos/, long_context/) of smartcomment
graphs carrying ``data.annotations``.

The split folder names the memory system. A split the benchmark adds later loads as its own
system; a ``.json`` directly under the root lands in split ``root`` with the system taken from
its project_id.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipelines import schema
from pipelines.readers.base import GraphRows, IngestError, SourceFile, list_files, split_of
from pipelines.readers.smartcomment import read_graph_file
from pipelines.storage.warehouse import relative_name

kind = "memtracebench"

# MemTraceBench's project_id per memory system, for files outside a split folder.
PROJECT_SYSTEMS = {"naiverag": "rag", "mem0": "mem0", "evermemos": "evermemos", "longcontext": "long_context"}


def system_for(split: str, project_id: str | None) -> str:
    if split in schema.MEMTRACEBENCH_SPLITS:
        return split
    if project_id:
        key = re.sub(r"[^a-z0-9]", "", project_id.lower())
        if key in PROJECT_SYSTEMS:
            return PROJECT_SYSTEMS[key]
    return split if split != "root" else (project_id or schema.UNKNOWN)


def discover(root: Path, source: str) -> list[SourceFile]:
    root = root.absolute()  # file paths keep their own names (a Hub cache links them to blobs)
    return [
        SourceFile(source, split_of(root, path, "root"), path, relative_name(root, path))
        for path in list_files(root, "**/*.json")
    ]


def read(file: SourceFile) -> Iterator[GraphRows | IngestError]:
    def system_of(graph: Any) -> str:
        return system_for(file.split, graph.project_id)

    return read_graph_file(file, system_of=system_of, provenance="memtracebench",
                           annotator_kind=schema.BENCHMARK_ANNOTATOR)
