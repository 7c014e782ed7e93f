"""What a check is and what it found: shared by the SQL checks, the expectation suites and the report.

A check is attached to one table (its Dagster asset) and has a severity: ``error`` checks are
structural (keys, uniqueness, references, counts, accounting) and block everything downstream of
the tables when they fail; ``warn`` checks are domain checks, reported but never blocking.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

ERROR = "error"
WARN = "warn"
SEVERITIES = (ERROR, WARN)

SAMPLE_ROWS = 10
CELL_CHARS = 120


@dataclass(frozen=True)
class CheckSpec:
    """One check: its name (unique per asset), the table it checks, and how it is computed."""

    name: str
    asset: str
    severity: str
    description: str
    origin: str  # "sql", "expectations" or "python"
    path: str | None = None  # the file that defines it, relative to the repository

    @property
    def blocking(self) -> bool:
        return self.severity == ERROR


@dataclass
class ExpectationOutcome:
    """One expectation of a suite, summed over every batch of every published partition file."""

    type: str
    kwargs: dict[str, Any]
    severity: str  # error / warn (from GX's critical / warning)
    notes: str | None
    element_count: int = 0
    missing_count: int = 0
    unexpected_count: int = 0
    success: bool = True
    samples: list[dict[str, Any]] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)

    @property
    def column(self) -> str | None:
        return self.kwargs.get("column")

    @property
    def label(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items() if k not in ("column", "batch_id"))
        return f"{self.type}({self.column}{', ' + args if args else ''})"

    @property
    def failing(self) -> int:
        return self.unexpected_count + (1 if self.exceptions and not self.unexpected_count else 0)


@dataclass
class CheckOutcome:
    """What one check found: failing count (rows returned), sample rows, and any error running it."""

    spec: CheckSpec
    failing: int
    columns: list[str] = field(default_factory=list)
    samples: list[tuple[Any, ...]] = field(default_factory=list)
    expectations: list[ExpectationOutcome] = field(default_factory=list)
    error: str | None = None  # the check could not be evaluated (counts as failed)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.failing == 0 and self.error is None

    def samples_markdown(self) -> str:
        """The sample rows as a markdown table, every cell escaped (trace content is untrusted)."""
        if self.error:
            return f"check could not run: {md_cell(self.error, 500)}"
        if not self.samples:
            return "_no failing rows_"
        lines = ["| " + " | ".join(md_cell(c) for c in self.columns) + " |", "|" + "---|" * len(self.columns)]
        lines += ["| " + " | ".join(md_cell(v) for v in row) + " |" for row in self.samples]
        more = self.failing - len(self.samples)
        if more > 0:
            lines.append(f"\n_and {more} more_")
        return "\n".join(lines)


def cell(value: Any, limit: int = CELL_CHARS) -> str:
    """One value as short plain text (long trace values are cut)."""
    text = "NULL" if value is None else str(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_MARKDOWN = str.maketrans({"|": "\\|", "`": "&#96;", "[": "&#91;", "]": "&#93;", "*": "&#42;"})


def md_cell(value: Any, limit: int = CELL_CHARS) -> str:
    """A markdown table cell: HTML-escaped; pipes, code spans, links and emphasis neutralised."""
    return html.escape(cell(value, limit)).translate(_MARKDOWN)
