-- failure_ends: the input and output nodes of the faulty operation of every row of failure_rows (the
-- rows of failures.sql, held in a temp table), at once: what op_subgraph() gives for one operation.
-- Grain: one row per (graph_id, op_id, role, full_node_id).
-- Columns:
--   graph_id, op_id       the faulty operation
--   op_name, op_category, op_session_id, actor   the operation (from operations)
--   role                  'input' (a source of one of the op's edges) | 'output' (a target)
--   full_node_id          the node
with ops as (
    select distinct r.graph_id, r.faulty_op_id as op_id, o.op_name, o.category as op_category,
           o.session_id as op_session_id, o.actor
    from failure_rows r
    join operations o on o.graph_id = r.graph_id and o.op_id = r.faulty_op_id
),
ends as (
    select ops.graph_id, ops.op_id, 'input' as role, e.source_full_node_id as full_node_id
    from ops join edges e on e.graph_id = ops.graph_id and e.op_id = ops.op_id
    union
    select ops.graph_id, ops.op_id, 'output' as role, e.target_full_node_id as full_node_id
    from ops join edges e on e.graph_id = ops.graph_id and e.op_id = ops.op_id
)
select ends.graph_id, ends.op_id, ops.op_name, ops.op_category, ops.op_session_id, ops.actor, ends.role,
       ends.full_node_id
from ends
join ops using (graph_id, op_id)
order by ends.graph_id, ends.op_id, ends.role, ends.full_node_id
