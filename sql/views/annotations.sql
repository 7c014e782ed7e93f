-- annotations: one row per failure annotation (failed query or failed multi-agent run).
-- Grain: (graph_id, annotation_id); faulty_op_id names the decisive faulty operation.
create or replace view annotations as
select * from read_parquet({{ files }});
