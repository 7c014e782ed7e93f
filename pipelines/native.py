"""Everything tracehouse does below Python's own objects, in one place: two calls through ctypes to
stable C interfaces, each kept because it pays for itself in a figure a user sees (BENCHMARKS.md,
"Low-level devices still in the code", gives each one's measured figure; tests/test_docs.py checks
that no other module of pipelines/ reaches under Python).

* :func:`utf8_view`: CPython's ``PyUnicode_AsUTF8AndSize`` (the official C API), so that a long
  node value is handed to Arrow without a copy (pipelines.readers.base.large_string_array).
* :func:`release_freed_memory`: glibc's ``malloc_trim``, so that what a big file freed goes back to
  the system before the marts and the dashboard (pipelines.build).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
from typing import Any

# CPython's own UTF-8 bytes of a str: for an ASCII str that is its buffer, for any other the UTF-8
# copy the str caches and frees with itself.
_utf8_of = ctypes.pythonapi.PyUnicode_AsUTF8AndSize
_utf8_of.restype = ctypes.c_void_p
_utf8_of.argtypes = [ctypes.py_object, ctypes.POINTER(ctypes.c_ssize_t)]


def utf8_view(value: str) -> tuple[int, int]:
    """The address and length of ``value``'s UTF-8 bytes, valid while ``value`` lives (the caller
    keeps it alive, e.g. as the ``base`` of ``pa.foreign_buffer``). Raises UnicodeEncodeError for a
    str that has no UTF-8 form (a lone surrogate)."""
    size = ctypes.c_ssize_t()
    address = _utf8_of(value, ctypes.byref(size))
    return address, size.value


def _glibc() -> Any:
    with contextlib.suppress(OSError, AttributeError, TypeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        return libc
    return None


_LIBC = _glibc()


def release_freed_memory() -> None:
    """Hand the heap's free pages back to the system (glibc's ``malloc_trim``; a no-op elsewhere).
    glibc keeps what a big file's decoded values and columns freed: after the 448 MB file of the
    benchmark corpus the build process stayed at 1455 MB resident through the marts and the
    dashboard; trimmed, at about 300 MB. The build calls it after a big split and once flattening is
    done (``build.RELEASE_AFTER_BYTES``), not after every split: the next one would fault the pages
    in again (0.35 s more on the 1.1 GB corpus's ingest, A/B)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
