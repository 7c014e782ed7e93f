-- failure_paths: the edges of every shortest path from the faulty operation's outputs to the end of
-- the failure, for every row of failure_rows (the rows of failures.sql, a temp table) at once: the
-- prediction node of a memory failure whose hops_to_prediction is known, the final step's output of a
-- multi-agent one (final_node_id).
-- A node n lies on a shortest path when fwd(n) + bwd(n) = total, where fwd = the edges from the
-- nearest output of the operation (breadth-first forward, bounded by hops_to_prediction), bwd = the
-- edges on to the target (breadth-first backward, bounded by total); an edge s -> t lies on one when
-- both ends do and fwd(t) = fwd(s) + 1.
-- Grain: one row per (graph_id, op_id, target, edge) on such a path.
-- Columns:
--   graph_id, op_id, target                     the faulty operation and the path's end
--   source_full_node_id, target_full_node_id    the edge
--   edge_op_id, edge_op_name                    the operation the edge belongs to
--   source_hops                                 edges from the nearest output to the edge's source
--   total_hops                                  edges from the nearest output to the target
with recursive
    targets as (
        select distinct graph_id, faulty_op_id as op_id,
               coalesce(prediction_node_id, final_node_id) as target,
               case when prediction_node_id is not null then hops_to_prediction end as bound
        from failure_rows
        where faulty_op_id is not null
          and ((prediction_node_id is not null and hops_to_prediction is not null) or final_node_id is not null)
    ),
    walk_edges as materialized (
        select e.graph_id, e.source_full_node_id as src, e.target_full_node_id as dst
        from edges e
        where e.graph_id in (select graph_id from targets) and e.source_full_node_id <> e.target_full_node_id
    ),
    fwd(graph_id, op_id, target, full_node_id, hops) using key (graph_id, op_id, target, full_node_id) as (
        select distinct t.graph_id, t.op_id, t.target, e.target_full_node_id, 0
        from targets t
        join edges e on e.graph_id = t.graph_id and e.op_id = t.op_id
        union
        select w.graph_id, w.op_id, w.target, e.dst, w.hops + 1
        from fwd w
        join targets t on t.graph_id = w.graph_id and t.op_id = w.op_id and t.target = w.target
        join walk_edges e on e.graph_id = w.graph_id and e.src = w.full_node_id
        where (t.bound is null or w.hops < t.bound)
          and not exists (
              select 1 from recurring.fwd seen
              where seen.graph_id = w.graph_id and seen.op_id = w.op_id and seen.target = w.target
                and seen.full_node_id = e.dst
          )
    ),
    total as (
        select graph_id, op_id, target, hops as total_hops from fwd where full_node_id = target
    ),
    bwd(graph_id, op_id, target, full_node_id, hops) using key (graph_id, op_id, target, full_node_id) as (
        select graph_id, op_id, target, target, 0 from total
        union
        select b.graph_id, b.op_id, b.target, e.src, b.hops + 1
        from bwd b
        join total t on t.graph_id = b.graph_id and t.op_id = b.op_id and t.target = b.target
        join walk_edges e on e.graph_id = b.graph_id and e.dst = b.full_node_id
        where b.hops < t.total_hops
          and not exists (
              select 1 from recurring.bwd seen
              where seen.graph_id = b.graph_id and seen.op_id = b.op_id and seen.target = b.target
                and seen.full_node_id = e.src
          )
    ),
    on_path as (
        select f.graph_id, f.op_id, f.target, f.full_node_id, f.hops, t.total_hops
        from fwd f
        join bwd b using (graph_id, op_id, target, full_node_id)
        join total t using (graph_id, op_id, target)
        where f.hops + b.hops = t.total_hops
    )
select
    s.graph_id,
    s.op_id,
    s.target,
    e.source_full_node_id,
    e.target_full_node_id,
    e.op_id as edge_op_id,
    o.op_name as edge_op_name,
    s.hops as source_hops,
    s.total_hops
from on_path s
join edges e on e.graph_id = s.graph_id and e.source_full_node_id = s.full_node_id
join on_path t
  on t.graph_id = s.graph_id and t.op_id = s.op_id and t.target = s.target
 and t.full_node_id = e.target_full_node_id and t.hops = s.hops + 1
left join operations o on o.graph_id = e.graph_id and o.op_id = e.op_id
union all
-- a path of no edge: the operation produced the target itself
select graph_id, op_id, target, null, null, null, null, 0, 0
from total where total_hops = 0
order by graph_id, op_id, target, source_hops, source_full_node_id, target_full_node_id, edge_op_id
