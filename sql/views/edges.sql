-- edges: one row per information flow source -> target, attributed to the operation op_id.
-- Grain: (graph_id, edge_id). Take the operation type from operations via op_id, not edges.category.
create or replace view edges as
select * from read_parquet({{ files }});
