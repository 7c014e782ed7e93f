"""Where the warehouse keeps its files and its committed state: the local folder and object
storage, build records and the commit log, the build lock, Iceberg snapshots, and the
benchmark datasets fetched from the Hugging Face Hub.

May import: the top-level modules of ``pipelines`` below it (schema, errors, text, progress,
native, on_thread, extras). Nothing of the build, validation, analytics or entry points.
"""
