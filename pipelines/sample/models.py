"""Toy lexical "models" standing in for the LLMs, embedders and retrievers of real memory systems.

No network, no weights: tokens, BM25 with coordination-first ranking, hashed bag-of-words vectors
(CRC32, so identical across processes, unlike ``hash()``), an exact reader of the fact language and
a string-matching judge. They are exact on purpose: with no fault injected a pipeline answers
correctly, so every failure in the sample corpus comes from an injected, attributed fault.
"""

from __future__ import annotations

import math
import re
import zlib
from collections import Counter
from collections.abc import Iterable

from . import facts

STOPWORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "before", "by", "change", "changed", "current", "did",
    "do", "does", "for", "from", "have", "i", "in", "is", "it", "latest", "me", "my", "now", "of",
    "on", "or", "s", "so", "still", "that", "the", "their", "this", "to", "was", "we", "what", "which",
    "who", "with", "you", "your",
})
_TOKEN = re.compile(r"[a-z0-9]+")
_LINE_PREFIX = re.compile(r"\[U\d+:D(\d+):(\d+)\] (?:([^:\n]+): )?")


def tokenize(text: str) -> list[str]:
    """Lower-cased alphanumeric tokens without stopwords."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]


class BM25Index:
    """An incremental BM25 index; ranking is coordination first (distinct query terms matched), then BM25.

    Coordination-first ranking is what makes the toy retrievers exact: a document about the asked
    subject *and* slot always outranks one about either alone.
    """

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self._tf: dict[str, Counter[str]] = {}
        self._len: dict[str, int] = {}
        self._order: dict[str, int] = {}
        self._postings: dict[str, set[str]] = {}
        self._total = 0
        self._seq = 0

    def __contains__(self, doc_id: str) -> bool:
        return doc_id in self._tf

    def add(self, doc_id: str, text: str) -> None:
        """Add or replace a document."""
        if doc_id in self._tf:
            self.remove(doc_id)
        tf = Counter(tokenize(text))
        self._tf[doc_id] = tf
        self._len[doc_id] = sum(tf.values())
        self._order.setdefault(doc_id, self._seq)
        self._seq += 1
        self._total += self._len[doc_id]
        for term in tf:
            self._postings.setdefault(term, set()).add(doc_id)

    def remove(self, doc_id: str) -> None:
        tf = self._tf.pop(doc_id, None)
        if tf is None:
            return
        self._total -= self._len.pop(doc_id)
        for term in tf:
            self._postings[term].discard(doc_id)

    def search(self, query: str, k: int, exclude: Iterable[str] = ()) -> list[tuple[str, float]]:
        """Top ``k`` (doc_id, score) pairs; ties go to the earlier document."""
        n = len(self._tf)
        if n == 0:
            return []
        avgdl = self._total / n or 1.0
        skip = set(exclude)
        terms = sorted(set(tokenize(query)))
        coord: Counter[str] = Counter()
        score: dict[str, float] = {}
        for term in terms:
            docs = self._postings.get(term)
            if not docs:
                continue
            idf = math.log(1.0 + (n - len(docs) + 0.5) / (len(docs) + 0.5))
            for d in docs:
                if d in skip:
                    continue
                tf = self._tf[d][term]
                norm = tf + self.k1 * (1 - self.b + self.b * self._len[d] / avgdl)
                coord[d] += 1
                score[d] = score.get(d, 0.0) + idf * tf * (self.k1 + 1) / norm
        ranked = sorted(score, key=lambda d: (-coord[d], -score[d], self._order[d]))
        return [(d, round(coord[d] + score[d] / 100.0, 6)) for d in ranked[:k]]


def hashed_vector(text: str, dims: int = 256) -> list[float]:
    """A unit-length hashed bag-of-words vector (unsigned feature hashing with CRC32, so that
    colliding tokens can only add similarity, never cancel a true match)."""
    vec = [0.0] * dims
    for token in tokenize(text):
        h = zlib.crc32(token.encode())
        vec[h % dims] += 1.0
    norm = math.sqrt(sum(x * x for x in vec)) or 1.0
    return [round(x / norm, 5) for x in vec]


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def rank_by_vector(query_vec: list[float], vectors: dict[str, list[float]], k: int,
                   order: dict[str, int], exclude: Iterable[str] = ()) -> list[tuple[str, float]]:
    """Top ``k`` documents by cosine similarity; ties go to the earlier document."""
    skip = set(exclude)
    scored = [(d, cosine(query_vec, v)) for d, v in vectors.items() if d not in skip]
    scored.sort(key=lambda x: (-x[1], order[x[0]]))
    return [(d, round(s, 6)) for d, s in scored[:k]]


def read_slot_history(context: str, subject: str, slot: str) -> tuple[str | None, str | None]:
    """Replay every statement about (subject, slot) in ``context`` in dialogue order.

    ``context`` is made of lines starting with a message label (``[U1:D2:5]``), holding either a raw
    message (``Caroline: <first-person text>``) or a canonical memory text. Returns (current value,
    value before the latest change); ``None`` where unknown or retracted.
    """
    if slot not in context:
        return None, None
    pats = facts.PATTERNS[slot]
    events: list[tuple[tuple[int, int, int], str, str | None, str | None]] = []
    line_cache: dict[int, re.Match[str] | None] = {}

    def _prefix(pos: int) -> re.Match[str] | None:
        start = context.rfind("\n", 0, pos) + 1
        if start not in line_cache:
            line_cache[start] = _LINE_PREFIX.match(context, start)
        return line_cache[start]

    for m in pats.canonical.finditer(context):
        if m["subject"] != subject:
            continue
        pre = _prefix(m.start())
        if pre is None or pre.group(3) is not None:
            continue
        events.append(((int(pre.group(1)), int(pre.group(2)), m.start()), "state", m["v"], m["old"]))
    for pos, kind, value, old in facts.parse_sentence_events(context, slot):
        pre = _prefix(pos)
        if pre is None or pre.group(3) != subject:
            continue
        events.append(((int(pre.group(1)), int(pre.group(2)), pos), kind, value, old))
    events.sort(key=lambda e: e[0])

    cur: str | None = None
    prev: str | None = None
    for _, kind, value, old in events:
        if kind == "state":
            cur = None if value == "none" else value
            prev = old
        elif kind == "intro":
            if cur is not None and cur != value:
                prev = cur
            cur = value
        else:  # update or retract
            prev = old
            cur = value
    return cur, prev


def answer(question: str, context: str, user: str) -> str:
    """The reader: answer a question from retrieved context only."""
    parsed = facts.parse_question(question, user)
    if parsed is None:
        return facts.UNKNOWN_ANSWER
    cur, prev = read_slot_history(context, parsed.subject, parsed.slot)
    if parsed.kind == "current":
        return cur if cur is not None else facts.UNKNOWN_ANSWER
    if parsed.kind == "previous":
        return prev if prev is not None else facts.UNKNOWN_ANSWER
    return "Yes" if cur is not None else "No"


def normalize_answer(text: str) -> str:
    text = re.sub(r"[^a-z0-9 ]+", " ", text.lower())
    words = [w for w in text.split() if w not in ("the", "a", "an")]
    return " ".join(words)


def judge(prediction: str, golden: list[str]) -> bool:
    """A strict string-matching judge: the normalised prediction equals one golden answer."""
    pred = normalize_answer(prediction)
    return any(pred == normalize_answer(g) for g in golden)
