-- sessions: one row per session of a graph (dialogue session, search, evaluation, trajectory).
-- Grain: (graph_id, session_id); ordinal = position in the graph's session list.
create or replace view sessions as
select * from read_parquet({{ files }});
