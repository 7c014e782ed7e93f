"""The four toy memory systems, one per MemTraceBench split."""

from __future__ import annotations

from .base import MemorySystem, Outcome
from .evermemos import EverMemOS
from .long_context import LongContext
from .mem0 import Mem0
from .rag import NaiveRAG

#: split folder -> memory system class (its ``project_id`` is the graph's project_id).
SYSTEMS: dict[str, type[MemorySystem]] = {
    "rag": NaiveRAG,
    "mem0": Mem0,
    "evermemos": EverMemOS,
    "long_context": LongContext,
}

__all__ = ["SYSTEMS", "EverMemOS", "LongContext", "Mem0", "MemorySystem", "NaiveRAG", "Outcome"]
