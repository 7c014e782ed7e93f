"""Source readers, one module per format. A new format is one module plus one line here."""

from __future__ import annotations

from pipelines.readers import memtracebench, smartcomment, tracertraj, whowhen
from pipelines.readers.base import Reader

READERS: dict[str, Reader] = {
    module.kind: module for module in (memtracebench, smartcomment, whowhen, tracertraj)
}


def reader_for(kind: str) -> Reader:
    try:
        return READERS[kind]
    except KeyError:
        raise ValueError(f"unknown source kind {kind!r}; known: {', '.join(sorted(READERS))}") from None
