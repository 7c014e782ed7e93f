"""The Dagster code location (``dagster dev -m pipelines.definitions``, ``tracehouse ui``): every
domain's definitions, bound to the warehouse and sources of tracehouse.toml (or the defaults)."""

from pipelines.config import load_settings
from pipelines.defs import build_definitions
from pipelines.defs.resources import TracehouseResource

_settings = load_settings(require_paths=False)
defs = build_definitions(TracehouseResource.from_settings(_settings), cron=_settings.cron)
