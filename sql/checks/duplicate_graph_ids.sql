-- duplicate_graph_ids: graph ids loaded from more than one file.
-- asset: graphs
-- severity: error
-- One partition's ingest rejects a repeated graph id (kind duplicate_graph_id), but two partitions
-- (source splits) are ingested separately: a graph id in two splits loads twice and only this check
-- sees it. Grain: one row per repeated graph_id; columns graph_id, copies, files.
select
    graph_id,
    count(*) as copies,
    string_agg(source || '/' || file, ', ' order by source, file) as files
from graphs
group by graph_id
having count(*) > 1
