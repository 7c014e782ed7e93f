-- failure_span_ends: what flows into and out of every span of the traces among failure_rows (the
-- rows of failures.sql, a temp table), by the edges the span owns (edges.op_id): a node an edge of
-- the span reads is an input (the span's own recorded input, a parent's input handed down, the
-- previous sibling's output, the last child's output), and so is the target of a parent_input edge
-- (the span's own input, which the parent's inputs flow into); a node its edges only write is an
-- output. (A later sibling that records inputs but no outputs: the sequence edge into its inputs
-- makes them outputs, as the graph has it.)
-- Grain: one row per (graph_id, op_id, role, full_node_id).
-- Columns:
--   graph_id, op_id   the span
--   role              'input' | 'output'
--   full_node_id      the node
--   via               the categories of the span's edges the node is on (span, parent_input, sequence,
--                     child_output), sorted
with
    span_edges as (
        select e.graph_id, e.op_id, e.source_full_node_id, e.target_full_node_id, e.category
        from edges e
        where e.graph_id in (select graph_id from failure_rows where is_trace)
    ),
    ends as (
        select graph_id, op_id, source_full_node_id as full_node_id, 'input' as role, category from span_edges
        union all
        select graph_id, op_id, target_full_node_id, 'output', category from span_edges
    ),
    -- what the span reads, and the inputs of its own a parent's input was handed down to
    reads as (
        select distinct graph_id, op_id, full_node_id from ends where role = 'input' or category = 'parent_input'
    )
select
    ends.graph_id,
    ends.op_id,
    case when r.full_node_id is not null then 'input' else 'output' end as role,
    ends.full_node_id,
    list(distinct ends.category order by ends.category) filter (where ends.category is not null) as via
from ends
left join reads r on r.graph_id = ends.graph_id and r.op_id = ends.op_id and r.full_node_id = ends.full_node_id
group by all
order by ends.graph_id, ends.op_id, role, ends.full_node_id
