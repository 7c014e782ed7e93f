"""An embedded default corpus: deterministic MemTraceBench-format execution graphs with injected,
attributed failures, produced by four toy memory systems traced with smartcomment."""

from __future__ import annotations

from .corpus import FAULTS_FILE, SPLITS, generate_corpus
from .faults import ERROR_CATEGORY_FIT, ERROR_TYPES, NULL_OP_ALLOWED

__all__ = ["ERROR_CATEGORY_FIT", "ERROR_TYPES", "FAULTS_FILE", "NULL_OP_ALLOWED", "SPLITS", "generate_corpus"]
