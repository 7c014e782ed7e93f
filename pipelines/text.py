"""Trace text made short and safe to show: one rule for every page, picture, report and preview.

Trace values are untrusted and can be megabytes long. Everything that shows one goes through
:func:`shorten` (one line, at most ``limit`` characters, a cut marked with "…"); HTML escaping is
the templates' autoescape (Jinja2) or :func:`html.escape`; Dagster's markdown metadata goes through
:func:`markdown_cell`, which also neutralises markdown's own syntax.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from typing import Any

ELLIPSIS = "…"
NULL = "NULL"

# Characters XML 1.0 cannot hold (SVG is XML), and lone surrogates.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff]")
_MARKDOWN = str.maketrans({"|": "\\|", "`": "&#96;", "[": "&#91;", "]": "&#93;", "*": "&#42;"})


def shorten(value: Any, limit: int, *, null: str = "") -> str:
    """``value`` as one line of at most ``limit`` characters: whitespace runs become one space,
    characters XML cannot hold become U+FFFD, and a cut ends with "…". None becomes ``null``."""
    if value is None:
        return null
    text = " ".join(_NOT_XML.sub("\ufffd", str(value)).split())
    return text if len(text) <= limit else text[: max(0, limit - 1)] + ELLIPSIS


def markdown_cell(value: Any, limit: int = 120) -> str:
    """A markdown table cell (Dagster metadata): shortened, HTML-escaped, and markdown's table,
    code, link and emphasis syntax neutralised."""
    return html.escape(shorten(value, limit, null=NULL)).translate(_MARKDOWN)


def markdown_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], limit: int = 40) -> str:
    """A small markdown table of untrusted values (asset previews, check samples)."""
    lines = ["| " + " | ".join(markdown_cell(c, limit) for c in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(markdown_cell(v, limit) for v in row) + " |" for row in rows]
    return "\n".join(lines) if len(lines) > 2 else "_empty_"
