-- nodes: one row per variable version (message, memory entry, query, prediction, judge score, ...).
-- Grain: (graph_id, full_node_id); value is the encoded value, value_bytes its UTF-8 length.
create or replace view nodes as
select * from read_parquet({{ files }});
