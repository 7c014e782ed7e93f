-- edges_with_unknown_operation: edges whose op_id is not an operation of the edge's graph.
-- asset: edges
-- severity: error
-- Grain: one row per such edge. An edge with a null op_id names no operation and is not reported.
select e.graph_id, e.edge_id, e.op_id
from edges as e
anti join operations as o on o.graph_id = e.graph_id and o.op_id = e.op_id
where e.op_id is not null
