"""The SQL side: DuckDB over a build's files, the declared SQL (marts, checks, seeds, macros) and
its lineage, computing marts and their unit tests, failure-attribution scoring inputs, and a
team's taxonomy crosswalk.

May import: ``pipelines.storage.warehouse``, ``pipelines.readers``, ``pipelines.config`` and the
top-level modules below them.
"""
