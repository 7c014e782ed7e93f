"""One build's work: its plan, the flattening of the splits it reads, the change detection, the
sync of remote sources, the commit, the run history in Dagster's instance, and the summary.

May import: ``pipelines.validation.validate``, ``pipelines.analytics``, ``pipelines.storage.warehouse``,
``pipelines.readers``, ``pipelines.config`` and the top-level modules; never ``pipelines.defs``
(the Dagster definitions import this package).
"""
