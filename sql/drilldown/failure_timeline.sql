-- failure_timeline: the steps of every multi-agent trajectory among failure_rows (the rows of
-- failures.sql, a temp table), in order, with who acted and the message each step wrote. An
-- OpenTelemetry trace is not among them: its view is a waterfall of its spans (failure_spans.sql).
-- Grain: one row per operation of those graphs.
-- Columns:
--   graph_id, step, op_id, op_name, category   the step (operations.step orders a trajectory)
--   actor                                      the agent who acted (as written in the source)
--   agent_role                                 its role (seed operation_types, kind 'agent')
--   operation_type                             the step's cross-system operation type (seed)
--   outputs                                    the nodes the step wrote (the message), sorted
with
    ops as (
        select o.graph_id, g.system, o.step, o.op_id, o.op_name, o.category, o.actor
        from operations o
        join graphs g using (graph_id)
        where o.graph_id in (select graph_id from failure_rows where graph_kind = 'multi_agent' and not is_trace)
    ),
    roles as (
        select system, actor, agent_role(system, actor) as agent_role
        from (select distinct system, actor from ops where actor is not null)
    ),
    types as (
        select system, op_name, category, operation_type(system, op_name, category) as operation_type
        from (select distinct system, op_name, category from ops)
    ),
    outputs as (
        select e.graph_id, e.op_id, list(distinct e.target_full_node_id order by e.target_full_node_id) as outputs
        from edges e
        where e.graph_id in (select graph_id from ops)
        group by e.graph_id, e.op_id
    )
select ops.graph_id, ops.step, ops.op_id, ops.op_name, ops.category, ops.actor, r.agent_role,
       t.operation_type, coalesce(x.outputs, []) as outputs
from ops
left join roles r on r.system = ops.system and r.actor = ops.actor
left join types t on t.system = ops.system and t.op_name is not distinct from ops.op_name
                 and t.category is not distinct from ops.category
left join outputs x on x.graph_id = ops.graph_id and x.op_id = ops.op_id
order by ops.graph_id, ops.step, ops.op_id
