"""How a node value is shown in a failure view or a drill-down picture: every long list of numbers
(an embedding, any numeric vector) folded to its dimension and first values.

An embedding stored as text (``{"vector": [0.0, 0.0, …`` 256 times) fills a node card or a picture's
box with digits and pushes the rest out of sight. A vector is found by its shape, not by a key name:
a bracketed run of at least :data:`MIN_LENGTH` numbers anywhere in the text (JSON, a Python repr, a
message quoting one, a list inside a list), also when the value was cut off inside the list. The
view keeps the list's whole text behind its summary (``split``); a picture shows the summary only
(``fold``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MIN_LENGTH = 16  # a list of fewer numbers is left as it is written
FIRST = 3  # values a summary shows

_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
# '[', then MIN_LENGTH or more numbers separated by commas, then ']' or the end of the (cut) text;
# each number is matched one way only, so a list that turns out not to be one fails in linear time
_VECTOR = re.compile(
    rf"\[\s*(?P<numbers>{_NUMBER}(?:\s*,\s*{_NUMBER}){{{MIN_LENGTH - 1},}})\s*(?:(?P<close>\])|,?\s*\Z)"
)
_SEPARATOR = re.compile(r"\s*,\s*")


@dataclass(frozen=True)
class Vector:
    """One list of numbers in a value: its length, first values and how many are not zero, and its
    text as written (``source``, what the view shows on request)."""

    length: int
    first: tuple[str, ...]
    nonzero: int
    cut: bool  # the value ends inside the list: ``length`` counts what is there
    source: str

    @property
    def summary(self) -> str:
        """``vector[256]: 0.01, -0.3, 0.2, …`` (and how many values are not zero, when some are)."""
        dimension = f"{self.length}+" if self.cut else str(self.length)
        more = ", …" if self.length > len(self.first) else ""
        sparse = f" ({self.nonzero} non-zero)" if self.nonzero < self.length else ""
        return f"vector[{dimension}]: {', '.join(self.first)}{more}{sparse}"


def _vector(match: re.Match[str]) -> Vector:
    numbers = _SEPARATOR.split(match["numbers"])
    return Vector(
        length=len(numbers),
        first=tuple(numbers[:FIRST]),
        nonzero=sum(1 for n in numbers if float(n) != 0),
        cut=match["close"] is None,
        source=match[0],
    )


def split(text: str) -> list[str | Vector]:
    """``text`` as its pieces in order: plain text, and each vector found in it."""
    if "[" not in text:
        return [text] if text else []
    parts: list[str | Vector] = []
    position = 0
    for match in _VECTOR.finditer(text):
        if match.start() > position:
            parts.append(text[position:match.start()])
        parts.append(_vector(match))
        position = match.end()
    if position < len(text):
        parts.append(text[position:])
    return parts


def fold(text: str) -> str:
    """``text`` with every vector replaced by its summary."""
    return "".join(p if isinstance(p, str) else p.summary for p in split(text))


__all__ = ["FIRST", "MIN_LENGTH", "Vector", "fold", "split"]
