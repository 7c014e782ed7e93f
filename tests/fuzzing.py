"""What the fuzz tests of the readers share: the hypothesis settings, mutations of a JSON document
or of a file's bytes, and a read of a source folder that holds every yielded item to the reader
contract (canonical rows or an IngestError with a kind and a reason, never another exception).

The CI run uses a modest number of examples; a longer local run:
    TRACEHOUSE_FUZZ_EXAMPLES=5000 .venv/bin/python -m pytest tests/test_fuzz_readers.py tests/test_otel.py -q
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from pipelines import schema
from pipelines.readers import reader_for
from pipelines.readers.base import GraphRows, IngestError

EXAMPLES = int(os.environ.get("TRACEHOUSE_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=5000, suppress_health_check=list(HealthCheck))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


def paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path into a JSON document (dict keys and list indexes)."""
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += paths(child, (*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value[:4]):
            found += paths(child, (*prefix, i))
    return found


@st.composite
def mutated(draw: st.DrawFn, base: Any) -> Any:
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        all_paths = paths(doc)
        path = draw(st.sampled_from(all_paths))
        if not path:
            doc = draw(json_values)
            continue
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        if draw(st.booleans()) and isinstance(parent, dict):
            parent.pop(path[-1], None)
        else:
            parent[path[-1]] = draw(json_values)
    return doc


@st.composite
def byte_mutated(draw: st.DrawFn, data: bytes) -> bytes:
    choice = draw(st.sampled_from(["truncate", "flip", "insert"]))
    at = draw(st.integers(0, max(0, len(data) - 1)))
    if choice == "truncate":
        return data[:at]
    if choice == "flip":
        return data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
    return data[:at] + draw(st.binary(min_size=1, max_size=4)) + data[at:]


def read_everything(kind: str, root: Path) -> list[GraphRows | IngestError]:
    reader = reader_for(kind)
    out: list[GraphRows | IngestError] = []
    for file in reader.discover(root, kind):
        try:
            out.extend(reader.read(file))
        except IngestError as error:
            out.append(error)
    for item in out:
        assert isinstance(item, GraphRows | IngestError)
        if isinstance(item, GraphRows):
            for name, table in item.tables.items():
                assert table.schema.equals(schema.GRAPH_TABLES[name])
        else:
            assert item.kind and item.reason
    return out


def dump(doc: Any) -> bytes:
    """JSON text of any document, big integers included (orjson stops at 64 bits)."""
    return json.dumps(doc).encode()


def write(root: Path, rel: str, data: bytes) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
