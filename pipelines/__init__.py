"""tracehouse: an analytical warehouse for execution graphs of LLM memory and multi-agent systems."""

import os

# Arrow's default allocator (mimalloc) keeps freed memory: what one big file's parse leaves
# resident is carried into the next, raising the ingest peak by as much. The system
# allocator returns large blocks at once at the same speed. The variable must be set before pyarrow
# is first imported (set_memory_pool alone, which pipelines.builds.ingest also calls, leaves some
# allocations on mimalloc).
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
