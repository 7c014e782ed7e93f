-- path: the edges of every shortest path from one node to another in a graph.
-- A node n lies on a shortest path from $start to $target when
--   downstream($start).hops(n) + upstream($target).hops(n) = downstream($start).hops($target);
-- an edge s -> t lies on one when both ends do and t is one hop further from $start than s.
-- Grain: one row per such edge (and operation); no rows when $target is not downstream of $start
-- or equals it. Parameters: $graph_id, $start, $target.
-- Columns:
--   source_full_node_id, target_full_node_id   the edge
--   op_id, op_name                             the operation the edge belongs to
--   source_hops                                edges from $start to the edge's source
--   total_hops                                 edges from $start to $target
with
    down as (
        select full_node_id, hops from downstream($graph_id, $start)
        union all
        select $start::varchar, 0
    ),
    up as (
        select full_node_id, hops from upstream($graph_id, $target)
        union all
        select $target::varchar, 0
    ),
    total as (select hops as total_hops from down where full_node_id = $target),
    on_path as (
        select down.full_node_id, down.hops
        from down
        join up using (full_node_id)
        cross join total
        where down.hops + up.hops = total.total_hops
    )
select
    e.source_full_node_id,
    e.target_full_node_id,
    e.op_id,
    o.op_name,
    s.hops as source_hops,
    (select total_hops from total) as total_hops
from edges e
join on_path s on s.full_node_id = e.source_full_node_id
join on_path t on t.full_node_id = e.target_full_node_id and t.hops = s.hops + 1
left join operations o on o.graph_id = e.graph_id and o.op_id = e.op_id
where e.graph_id = $graph_id
order by source_hops, e.source_full_node_id, e.target_full_node_id, e.op_id
