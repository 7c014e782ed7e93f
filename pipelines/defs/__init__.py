"""Dagster definitions, one module per domain; ``build_definitions`` binds them with the automation
(sensor, schedule) and attaches the resource. Every asset is materialized by one job, the build
(``warehouse.build_job``), whoever starts it."""

from __future__ import annotations

import dagster as dg

from pipelines.config import DEFAULT_CRON
from pipelines.defs import analytics, dashboards, validation, warehouse
from pipelines.defs.automation import build_automation_defs
from pipelines.defs.resources import TracehouseResource, default_resource

DOMAINS = [warehouse.defs, analytics.defs, validation.defs, dashboards.defs]


def build_definitions(resource: TracehouseResource | None = None, cron: str = DEFAULT_CRON) -> dg.Definitions:
    resources = dg.Definitions(resources={"tracehouse": resource or default_resource()})
    return dg.Definitions.merge(*DOMAINS, build_automation_defs(cron), resources)
