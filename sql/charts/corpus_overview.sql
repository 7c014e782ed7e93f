-- corpus_overview: what the warehouse holds: graphs, nodes, edges and annotations per system and dataset.
-- Grain: one row per (system, dataset, measure), from the graphs table (its per-graph row counts).
-- Columns:
--   system, dataset   the source split's system and dataset
--   graph_kind        'memory' | 'multi_agent' (graph_kinds() macro)
--   label             'system · dataset', the row label
--   measure           'graphs' | 'nodes' | 'edges' | 'annotations'
--   measure_order     1..4, the panel order
--   value             the count
with per_split as (
    select
        g.system,
        g.dataset,
        any_value(k.graph_kind) as graph_kind,
        count(*) as graphs,
        sum(g.n_nodes) as nodes,
        sum(g.n_edges) as edges,
        sum(g.n_annotations) as annotations
    from graphs g
    join graph_kinds() k using (graph_id)
    group by g.system, g.dataset
)
select system, dataset, graph_kind, system || ' · ' || dataset as label, measure,
       case measure when 'graphs' then 1 when 'nodes' then 2 when 'edges' then 3 else 4 end as measure_order,
       value::bigint as value
from per_split
unpivot (value for measure in (graphs, nodes, edges, annotations))
order by graph_kind, system, dataset, measure_order
