-- operations: one row per operation (memory-system op, QA, judge, or one multi-agent step).
-- Grain: (graph_id, op_id); step = 0-based order in the graph; actor = the agent (multi-agent only).
create or replace view operations as
select * from read_parquet({{ files }});
