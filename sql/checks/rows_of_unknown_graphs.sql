-- rows_of_unknown_graphs: rows of the graph tables whose graph_id is not a row of graphs.
-- asset: graphs
-- severity: error
-- Grain: one row per (table_name, graph_id); rows = how many rows of that table name the missing graph.
with child_rows as (
    select 'sessions' as table_name, graph_id from sessions
    union all select 'nodes', graph_id from nodes
    union all select 'edges', graph_id from edges
    union all select 'operations', graph_id from operations
    union all select 'annotations', graph_id from annotations
)
select c.table_name, c.graph_id, count(*) as rows
from child_rows as c
anti join graphs as g on g.graph_id = c.graph_id
group by all
