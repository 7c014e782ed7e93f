"""The checks of a build's tables: SQL integrity checks and Great Expectations suites, their
cache, their report, and the worker process that runs GX beside a build.

May import: ``pipelines.analytics``, ``pipelines.storage.warehouse``, ``pipelines.readers``,
``pipelines.config`` and the top-level modules.
"""
