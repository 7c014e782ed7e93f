-- The pure-DuckDB ingest a user would write: read every graph file with read_json (object size
-- limit raised), unnest data.* into one table each. bench/methods.py then COPYs each table to
-- zstd Parquet. Variables: corpus_glob.
create temp table raw as
select * from read_json(getvariable('corpus_glob'), maximum_object_size = 2147483647, filename = true);
create table graphs as
select graph_id, user_id, project_id, created_at, filename, to_json(metadata) as metadata,
       len(data.nodes) as n_nodes, len(data.edges) as n_edges, len(data.operations) as n_operations,
       len(data.sessions) as n_sessions, len(data.annotations) as n_annotations
from raw;
create table nodes as select graph_id as g, unnest(data.nodes, recursive := true) from raw;
create table edges as select graph_id as g, unnest(data.edges, recursive := true) from raw;
create table operations as select graph_id as g, unnest(data.operations, recursive := true) from raw;
create table sessions as select graph_id as g, unnest(data.sessions, recursive := true) from raw;
create table annotations as select graph_id as g, unnest(data.annotations, recursive := true) from raw;
