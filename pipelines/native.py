"""Everything tracehouse does below Python's own objects, in one place: calls through ctypes to a
stable C interface, kept because it pays for itself in a figure a user sees (BENCHMARKS.md,
"Low-level devices still in the code", gives its measured figure, bench/devices.py measures it;
tests/test_docs.py checks that no other module of pipelines/ reaches under Python).

* :func:`utf8_view`: CPython's ``PyUnicode_AsUTF8AndSize`` (the official C API), so that a long
  node value is handed to Arrow without a copy (pipelines.readers.base.large_string_array).

glibc's ``malloc_trim`` after big splits is not among them: on a whole build it lowers neither the
peak nor the wall time (BENCHMARKS.md).
"""

from __future__ import annotations

import ctypes

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
