-- graphs: one row per execution graph (one file, or one record of a multi-record file).
-- Grain: graph_id. Columns: see docs/TABLES.md. Reads every published partition.
create or replace view graphs as
select * from read_parquet('tables/*/current/graphs.parquet');
