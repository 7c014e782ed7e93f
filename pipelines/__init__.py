"""tracehouse: an analytical warehouse for execution graphs of LLM memory and multi-agent systems."""

import os

# Arrow's default allocator (mimalloc) keeps freed memory: a 1 GiB reservation whose resident part
# carried ~270 MB from one big file into the next, raising the ingest peak by as much. The system
# allocator returns large blocks at once at the same speed. The variable must be set before pyarrow
# is first imported (set_memory_pool in pipelines.ingest alone left some allocations on mimalloc).
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
