"""Let an ingest reuse the memory it frees instead of faulting fresh pages in for every file.

glibc serves a large allocation with its own mmap and unmaps it on free, and it trims the heap
whenever its free top passes a threshold. An ingest allocates and frees file-sized buffers all the
time (the file's bytes, the decoded strings, Arrow columns, Parquet pages), so every one of them
came back as new zero-filled pages: a million page faults and 3 s of system time on the 1.1 GB
benchmark corpus, more than the JSON decode itself. With both thresholds raised, freed memory
stays in the heap and the next file, and the next partition, reuses it. :func:`release_freed_memory`
hands it back to the system once a build's partitions are ingested (before the checks and marts,
whose DuckDB and Great Expectations allocate elsewhere) and after each build, so a long-lived
process (``tracehouse watch``) does not keep its high-water mark. Giving it back after every
partition cost ~0.1 s on the benchmark corpus: the trim, and then faulting the pages in again.

Only glibc has these knobs; elsewhere both functions do nothing.
"""

import ctypes
import platform
import threading

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_LARGEST = 2**31 - 1  # mallopt takes an int: blocks up to 2 GiB are kept for reuse

_lock = threading.Lock()
_libc: ctypes.CDLL | None = None
_kept = False


def _glibc() -> ctypes.CDLL | None:
    global _libc
    if _libc is None and platform.libc_ver()[0] == "glibc":
        _libc = ctypes.CDLL(None)
    return _libc


def keep_freed_memory() -> bool:
    """Keep freed blocks for reuse (process-wide, idempotent); True when the allocator agreed."""
    global _kept
    with _lock:
        libc = _glibc()
        if libc is not None and not _kept:
            _kept = bool(libc.mallopt(ctypes.c_int(_M_MMAP_THRESHOLD), ctypes.c_int(_LARGEST))) and bool(
                libc.mallopt(ctypes.c_int(_M_TRIM_THRESHOLD), ctypes.c_int(_LARGEST))
            )
        return _kept


def release_freed_memory() -> None:
    """Return the free memory kept so far to the system (whole free pages of every arena)."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(ctypes.c_size_t(0))
