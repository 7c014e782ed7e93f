-- The pure-DuckDB flatten of OTLP/JSON files a user would write (bench/collect.py): read every
-- request line with read_json, unnest resourceSpans -> scopeSpans -> spans into one table of spans
-- (ids, name, kind, times, status, attributes, the resource's service.name). bench/collect.py then
-- COPYs it to zstd Parquet. No graph mapping (nodes, edges, sessions): the floor of reading the
-- files. Variables: otlp_glob.
create temp table requests as
select resourceSpans as rs
from read_json(getvariable('otlp_glob'), format = 'newline_delimited', maximum_object_size = 2147483647,
               columns = {resourceSpans: 'JSON[]'});
create temp table scopes as
select r.resource as resource, unnest(from_json(r.scopeSpans, '["JSON"]')) as ss
from (select unnest(rs) as r0, r0->'resource' as resource, r0->'scopeSpans' as scopeSpans from requests) as r;
create table spans as
select s->>'traceId' as trace_id, s->>'spanId' as span_id, s->>'parentSpanId' as parent_span_id,
       s->>'name' as name, (s->>'kind')::integer as kind,
       (s->>'startTimeUnixNano')::ubigint as start_ns, (s->>'endTimeUnixNano')::ubigint as end_ns,
       (s->'status'->>'code')::integer as status_code, s->'attributes' as attributes,
       resource->'attributes' as resource_attributes
from (select resource, unnest(from_json(ss->'spans', '["JSON"]')) as s from scopes);
