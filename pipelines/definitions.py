"""The Dagster code location: every domain's definitions, bound to the configured warehouse."""

from pipelines.defs import build_definitions

defs = build_definitions()
