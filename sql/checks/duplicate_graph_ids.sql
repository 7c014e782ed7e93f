-- duplicate_graph_ids: graph ids loaded from more than one file.
-- asset: graphs
-- severity: error
-- The ingest quarantines a repeated graph id in ingest_errors (kind duplicate_graph_id), across every
-- source, so this finds only a bug of the warehouse itself. Grain: one row per repeated graph_id;
-- columns graph_id, copies, files.
select
    graph_id,
    count(*) as copies,
    string_agg(source || '/' || file, ', ' order by source, file) as files
from graphs
group by graph_id
having count(*) > 1
