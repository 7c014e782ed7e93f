"""The validation report: one self-contained HTML page (no script, no remote resource), the warehouse's
equivalent of GX Data Docs. Every check with its status, failing count and sample rows; every
expectation of every suite; the input files and ingest errors. All text is escaped: sample rows
are trace content, and trace content is untrusted.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from pipelines.storage import Warehouse, write_atomic
from pipelines.validation.checks import ERROR, CheckOutcome, ExpectationOutcome, cell
from pipelines.validation.run import ValidationRun

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1200px;color:#1d2330;
padding:0 1em}
h1{font-size:1.5em}h2{margin-top:2em;border-bottom:1px solid #d7dbe3;padding-bottom:.2em}h3{margin:1.4em 0 .4em}
table{border-collapse:collapse;margin:.4em 0 1em;width:100%}th,td{border:1px solid #d7dbe3;padding:3px 7px;
text-align:left;vertical-align:top}th{background:#f2f4f8}td.n{text-align:right;font-variant-numeric:tabular-nums}
.pass{color:#17663a;font-weight:600}.fail{color:#b3261e;font-weight:600}.warn{color:#8a5a00;font-weight:600}
.muted{color:#667085}code{background:#f2f4f8;padding:0 3px;border-radius:3px}
.cards{display:flex;gap:1em;flex-wrap:wrap}.card{border:1px solid #d7dbe3;border-radius:6px;padding:.6em 1em}
.card b{font-size:1.4em;display:block}
"""


def _e(value: Any) -> str:
    return html.escape(cell(value, 400), quote=True)


def _status(outcome: CheckOutcome) -> str:
    if outcome.passed:
        return '<span class="pass">passed</span>'
    if outcome.spec.severity == ERROR:
        return '<span class="fail">FAILED</span>'
    return '<span class="warn">warning</span>'


def _table(columns: list[str], rows: list[tuple[Any, ...]] | list[list[Any]], numeric: set[int] | None = None) -> str:
    numeric = numeric or set()
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f'<td{" class=n" if i in numeric else ""}>{_e(v)}</td>' for i, v in enumerate(row)) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _expectations_table(expectations: list[ExpectationOutcome]) -> str:
    rows = []
    for exp in expectations:
        status = "passed" if exp.success else ("FAILED" if exp.severity == ERROR else "warning")
        rows.append([
            status,
            exp.type,
            exp.column,
            json.dumps({k: v for k, v in exp.kwargs.items() if k not in ("column", "batch_id")}, default=str),
            exp.element_count,
            exp.unexpected_count,
            "; ".join(exp.exceptions) or exp.notes or "",
        ])
    return _table(["status", "expectation", "column", "arguments", "rows", "unexpected", "notes"], rows, {4, 5})


def render(run: ValidationRun) -> str:
    """The report page for one validation run."""
    failed, warnings = run.blocking_failures, run.warnings
    passed = len(run.outcomes) - len(run.failed)
    verdict = (
        '<span class="fail">blocking checks failed: tables downstream were not refreshed</span>' if failed
        else '<span class="warn">passed with warnings</span>' if warnings
        else '<span class="pass">all checks passed</span>'
    )
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>tracehouse validation</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>tracehouse validation report</h1>",
        f"<p>{verdict}</p>",
        f'<p class="muted">warehouse <code>{_e(run.warehouse)}</code> · validated {_e(run.started_at)} · '
        f"{len(run.partitions)} partitions · {run.seconds:.2f} s</p>",
        '<div class="cards">',
        f'<div class="card"><b>{len(run.outcomes)}</b>checks</div>',
        f'<div class="card"><b class="pass">{passed}</b>passed</div>',
        f'<div class="card"><b class="fail">{len(failed)}</b>blocking failures</div>',
        f'<div class="card"><b class="warn">{len(warnings)}</b>warnings</div>',
        f'<div class="card"><b>{run.ingest_error_total}</b>ingest errors</div>',
        "</div>",
        "<h2>Checks</h2>",
        "<p class=muted>error checks are structural and block the marts when they fail; "
        "warn checks are domain checks and never block. Failing = rows the check returns.</p>",
    ]
    rows = []
    for o in run.outcomes:
        rows.append(
            "<tr>"
            f"<td>{_status(o)}</td><td>{_e(o.spec.asset)}</td>"
            f'<td><a href="#{_e(o.spec.asset)}-{_e(o.spec.name)}">{_e(o.spec.name)}</a></td>'
            f"<td>{'error (blocking)' if o.spec.blocking else 'warn'}</td>"
            f"<td class=n>{o.failing}</td><td>{_e(o.spec.description)}</td>"
            "</tr>"
        )
    parts.append(
        "<table><thead><tr><th>status</th><th>table</th><th>check</th><th>severity</th><th>failing</th>"
        f"<th>what it finds</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )

    parts.append("<h2>Details</h2>")
    for o in run.outcomes:
        parts.append(f'<h3 id="{_e(o.spec.asset)}-{_e(o.spec.name)}">{_status(o)} {_e(o.spec.asset)} · '
                     f"{_e(o.spec.name)}</h3>")
        source = f" · defined in <code>{_e(o.spec.path)}</code>" if o.spec.path else ""
        parts.append(f"<p>{_e(o.spec.description)}{source} · {o.seconds:.3f} s</p>")
        if o.error:
            parts.append(f'<p class="fail">the check could not run: {_e(o.error)}</p>')
        if o.samples:
            more = o.failing - len(o.samples)
            parts.append(f"<p>{o.failing} failing; first {len(o.samples)}:</p>")
            parts.append(_table(o.columns, o.samples))
            if more > 0:
                parts.append(f'<p class="muted">… and {more} more.</p>')
        if o.expectations:
            parts.append(_expectations_table(o.expectations))

    parts.append("<h2>Input files</h2>")
    parts.append("<p class=muted>From the published manifests (view <code>input_files</code>): every file is "
                 "loaded, partly loaded (some records rejected) or rejected.</p>")
    parts.append(_table(["partition", "outcome", "files"], run.input_files, {2}))
    parts.append("<h2>Ingest errors</h2>")
    if run.ingest_error_total:
        shown = len(run.ingest_errors)
        parts.append(f"<p>{run.ingest_error_total} rows in <code>ingest_errors</code>"
                     f"{f', first {shown}' if shown < run.ingest_error_total else ''} "
                     "(rejected = the file or record did not load; false = loaded, defect noted):</p>")
        parts.append(_table(run.ingest_error_columns, run.ingest_errors))
    else:
        parts.append("<p class=pass>no ingest errors</p>")
    parts.append("</body></html>\n")
    return "".join(parts)


def summary(run: ValidationRun) -> dict[str, Any]:
    """A machine-readable digest of the run (kept in the build record, and as validation-*.json)."""
    return {
        "warehouse": run.warehouse,
        "validated_at": run.started_at,
        "partitions": run.partitions,
        "checks": [
            {
                "asset": o.spec.asset,
                "name": o.spec.name,
                "severity": o.spec.severity,
                "passed": o.passed,
                "failing": o.failing,
                "error": o.error,
                "description": o.spec.description,
            }
            for o in run.outcomes
        ],
        "ingest_errors": run.ingest_error_total,
    }


def write_report(run: ValidationRun, warehouse: Warehouse, attempt: str) -> tuple[Path, Path]:
    """Write the report of one build attempt, ``reports/validation-<attempt>.html`` and ``.json``;
    the commit publishes the committed build's as reports/validation.html and .json."""
    html_path = write_atomic(warehouse.reports_dir / f"validation-{attempt}.html", render(run))
    json_path = write_atomic(warehouse.reports_dir / f"validation-{attempt}.json", json.dumps(summary(run), indent=1))
    return html_path, json_path
