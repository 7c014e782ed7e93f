"""OTLP/JSON lines written as the OpenTelemetry exporters write them, for the tests of the otlp source."""

from __future__ import annotations

import gzip
import json
from pathlib import Path


def write_lines(path: Path, lines: list[str], gz: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data) if gz else data)


def otlp_line(spans: list[dict], service: str | None = "svc") -> str:
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": service}}] if service else []}
    scope_spans = [{"scope": {"name": "t"}, "spans": spans}]
    return json.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": scope_spans}]})


def otlp_span(trace: str, span_id: str, parent: str = "", name: str = "s", **attributes) -> dict:
    attrs = [{"key": k.replace("__", "."), "value": {"stringValue": v} if isinstance(v, str) else {"intValue": str(v)}}
             for k, v in attributes.items()]
    return {"traceId": trace, "spanId": span_id, "parentSpanId": parent, "name": name, "kind": 3,
            "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000000500000000",
            "attributes": attrs, "status": {"code": 1}}
