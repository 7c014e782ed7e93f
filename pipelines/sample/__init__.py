"""An embedded default corpus: deterministic MemTraceBench-format execution graphs with injected,
attributed failures, produced by four toy memory systems traced with smartcomment.

Import what you use from its modules: ``corpus`` (``generate_corpus``, ``SPLITS``), ``faults``,
``predictions`` and ``archive`` (the shipped corpus `make run` unpacks). This package imports none
of them itself, so unpacking the archive or naming the prediction methods does not load the
generator and smartcomment, a visible part of a `make run`.
"""
