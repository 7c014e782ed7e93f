-- graphs: one row per execution graph (one file, or one record of a multi-record file).
-- Grain: graph_id. Columns: see docs/TABLES.md. Reads every partition of one build.
create or replace view graphs as
select * from read_parquet({{ files }});
