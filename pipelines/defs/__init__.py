"""Dagster definitions, one module per domain; ``build_definitions`` binds them and the resource."""

from __future__ import annotations

import dagster as dg

from pipelines.defs import warehouse
from pipelines.defs.resources import TracehouseResource, default_resource

DOMAINS = [warehouse.defs]


def build_definitions(resource: TracehouseResource | None = None) -> dg.Definitions:
    merged = dg.Definitions.merge(*DOMAINS)
    return dg.Definitions.merge(
        merged, dg.Definitions(resources={"tracehouse": resource or default_resource()})
    )
