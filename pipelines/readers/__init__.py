"""Source readers, one module per format. A new format is one module plus one line here."""

from __future__ import annotations

from types import ModuleType

from pipelines.readers import memtracebench, smartcomment, tracertraj, whowhen

READERS: dict[str, ModuleType] = {
    module.kind: module for module in (memtracebench, smartcomment, whowhen, tracertraj)
}


def reader_for(kind: str) -> ModuleType:
    try:
        return READERS[kind]
    except KeyError:
        raise ValueError(f"unknown source kind {kind!r}; known: {', '.join(sorted(READERS))}") from None
