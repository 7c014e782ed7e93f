"""The report of one validation: ``reports/validation-<attempt>.html`` (the page,
``dashboards/templates/validation.html.j2``) and ``.json`` (one line per check); the commit
publishes the committed build's as ``reports/validation.html`` and ``.json``."""

from __future__ import annotations

import json
from pathlib import Path

from pipelines.storage.warehouse import Warehouse, write_atomic
from pipelines.text import shorten
from pipelines.validation.checks import ERROR, REPO
from pipelines.validation.validate import ValidationRun


def render_report(run: ValidationRun) -> str:
    """The report page of one validation: self-contained, no script, every value escaped by the
    template (trace content is untrusted)."""
    import jinja2

    folder = REPO / "dashboards" / "templates"
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(folder), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["short"] = lambda value, limit=400: shorten(value, limit, null="NULL")
    return env.get_template("validation.html.j2").render(
        run=run, css=(folder / "validation.css").read_text(), error=ERROR,
        passed=len(run.outcomes) - len(run.failed),
        kwargs_json=lambda e: json.dumps({k: v for k, v in e.kwargs.items() if k not in ("column", "batch_id")},
                                         default=str),
    )


def write_report(run: ValidationRun, warehouse: Warehouse, attempt: str) -> tuple[Path, Path]:
    """The report of one build attempt, as HTML and JSON."""
    html_path = write_atomic(warehouse.reports_dir / f"validation-{attempt}.html", render_report(run))
    digest = {"warehouse": run.warehouse, "validated_at": run.started_at, "partitions": run.partitions,
              "checks": run.results(), "ingest_errors": run.ingest_error_total}
    json_path = write_atomic(warehouse.reports_dir / f"validation-{attempt}.json", json.dumps(digest, indent=1))
    return html_path, json_path
