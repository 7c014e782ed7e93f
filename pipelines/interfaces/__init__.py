"""What users call: the ``tracehouse`` CLI and its build driver, ``watch``, the SQL shell, the
Python API, the OTLP receiver and its landing folder, and the Dask fan-out a build starts.

May import everything below it, ``pipelines.defs`` included; nothing imports it but
``tracehouse`` and the tests.
"""
