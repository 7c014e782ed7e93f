"""Dagster definitions, one module per domain; ``build_definitions`` binds them, applies the
automation policy once, and attaches the resource."""

from __future__ import annotations

import warnings

import dagster as dg

from pipelines import schema
from pipelines.config import DEFAULT_CRON
from pipelines.defs import analytics, dashboards, validation, warehouse
from pipelines.defs.automation import build_automation_defs
from pipelines.defs.resources import TracehouseResource, default_resource

DOMAINS = [warehouse.defs, analytics.defs, validation.defs, dashboards.defs]


def _follow_upstream(spec: dg.AssetSpec) -> dg.AssetSpec:
    """Policy: everything downstream of the tables refreshes when they change (declarative automation)."""
    return spec.replace_attributes(automation_condition=dg.AutomationCondition.eager())


def build_definitions(resource: TracehouseResource | None = None, cron: str = DEFAULT_CRON) -> dg.Definitions:
    resources = dg.Definitions(resources={"tracehouse": resource or default_resource()})
    merged = dg.Definitions.merge(*DOMAINS, build_automation_defs(cron), resources)
    downstream = dg.AssetSelection.all() - dg.AssetSelection.assets(*schema.TABLES)
    with warnings.catch_warnings():  # the one supported way to apply a policy to resolved specs is "preview"
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return merged.map_resolved_asset_specs(func=_follow_upstream, selection=downstream)
