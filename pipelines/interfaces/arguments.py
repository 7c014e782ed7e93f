"""Numbers given on the command line, checked as argparse reads them: one rule for the CLI's options
and the SQL shell's dot-commands, so a bad value is refused in the same words wherever it is given.

Imports nothing but the standard library: the CLI builds its parser from it for every command.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def number[Number: (int, float)](parse: Callable[[str], Number], least: Number, *, exclusive: bool = False,
                                 wanted: str) -> Callable[[str], Number]:
    """An argparse ``type=`` that reads a finite number (``parse`` is ``int`` or ``float``) of at least
    ``least`` (above it, when ``exclusive``); ``wanted`` ends "must be ..." when it is not."""
    what = "a whole number" if parse is int else "a number"

    def checked(text: str) -> Number:
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not (value > least if exclusive else value >= least) or not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be {wanted}, got {text.strip()}")
        return value

    checked.__name__ = what.removeprefix("a ").replace(" ", "_")  # argparse's name for the type in messages
    return checked


positive_int = number(int, 1, wanted="at least 1")
positive_float = number(float, 0.0, exclusive=True, wanted="a positive number")
