-- graph_row_counts_mismatch: graphs whose n_* columns disagree with the rows the tables hold for them.
-- asset: graphs
-- severity: error
-- Grain: one row per (graph_id, table_name) that disagrees; expected = graphs.n_<table>, actual = rows found.
-- (Rows whose graph is missing from graphs are rows_of_unknown_graphs' business.)
with expected as (
    unpivot (select graph_id, n_sessions, n_nodes, n_edges, n_operations, n_annotations from graphs)
    on n_sessions, n_nodes, n_edges, n_operations, n_annotations
    into name count_column value expected
),
actual as (
    select graph_id, 'n_sessions' as count_column, count(*) as actual from sessions group by all
    union all select graph_id, 'n_nodes', count(*) from nodes group by all
    union all select graph_id, 'n_edges', count(*) from edges group by all
    union all select graph_id, 'n_operations', count(*) from operations group by all
    union all select graph_id, 'n_annotations', count(*) from annotations group by all
)
select
    e.graph_id,
    substr(e.count_column, 3) as table_name,
    e.expected,
    coalesce(a.actual, 0) as actual
from expected as e
left join actual as a using (graph_id, count_column)
where e.expected <> coalesce(a.actual, 0)
