-- failures: one row per failure annotation, with everything its failure view's header says and
-- where its drill-down path ends: the set-based start of the failure views (dashboards/failure_view.py),
-- for every annotation at once (or those in $annotation_ids; NULL = all).
-- Grain: one row per annotation (graph_id, annotation_id), from failure_propagation, annotations,
-- operations and graphs.
-- Columns:
--   graph_id, annotation_id, system, dataset, graph_kind, error_type, error_class   the annotation
--   faulty_op_id, op_name, op_category, op_actor, op_step, operation_type, phase     the decisive faulty operation
--   faulty_session_id, faulty_session_category                                       its session
--   query_id, query, golden_answers, prediction, reason, source_evidence_ids, provenance,
--   annotator_kind                                                                   the label
--   prediction_node_id, prediction_resolved_by, hops_to_prediction                   memory: the prediction
--   session_distance, sessions_between                                               memory: sessions
--   responsible_agent, agent_role, decisive_step, n_steps, step_actor, agent_spoke_step   multi-agent
--   final_node_id     multi-agent graphs (no prediction node): the output node of the trajectory's last
--                     step, where the drill-down path from the faulty step ends; NULL otherwise
--   is_trace          the graph is an OpenTelemetry trace (graph_id 'otel:<trace id>', as graph_kinds() tells
--                     them): its view is a waterfall of the spans (failure_spans.sql)
--   file_sha256       the graph's source file (what the view is made from, with the code)
--   draw_order        0-based round-robin order over systems (a picture limit still covers every system)
with
    f as (
        select * from failure_propagation
        where $annotation_ids is null or list_contains($annotation_ids, annotation_id)
    ),
    final_node as (
        select e.graph_id, first(e.target_full_node_id order by o.step desc, e.target_full_node_id) as final_node_id
        from edges e
        join operations o on o.graph_id = e.graph_id and o.op_id = e.op_id
        where e.graph_id in (select graph_id from f where graph_kind = 'multi_agent' and prediction_node_id is null)
        group by e.graph_id
    ),
    ranked as (
        select f.*, row_number() over (partition by f.system order by f.graph_id, f.annotation_id) as system_rank
        from f
    )
select
    f.graph_id,
    f.annotation_id,
    f.system,
    f.dataset,
    f.graph_kind,
    f.error_type,
    f.error_class,
    f.faulty_op_id,
    f.op_name,
    o.category as op_category,
    o.actor as op_actor,
    o.step as op_step,
    f.operation_type,
    f.phase,
    f.faulty_session_id,
    f.faulty_session_category,
    f.query_id,
    a.query,
    a.golden_answers,
    a.prediction,
    a.reason,
    a.source_evidence_ids,
    a.provenance,
    a.annotator_kind,
    f.prediction_node_id,
    f.prediction_resolved_by,
    f.hops_to_prediction,
    f.session_distance,
    f.sessions_between,
    f.responsible_agent,
    f.agent_role,
    f.decisive_step,
    f.n_steps,
    f.step_actor,
    f.agent_spoke_step,
    case when f.graph_kind = 'multi_agent' and f.prediction_node_id is null then fin.final_node_id end
        as final_node_id,
    f.graph_id like 'otel:%' as is_trace,
    g.file_sha256,
    row_number() over (order by f.system_rank, f.system, f.graph_id, f.annotation_id) - 1 as draw_order
from ranked f
left join annotations a on a.graph_id = f.graph_id and a.annotation_id = f.annotation_id
left join operations o on o.graph_id = f.graph_id and o.op_id = f.faulty_op_id
left join graphs g on g.graph_id = f.graph_id
left join final_node fin on fin.graph_id = f.graph_id
order by draw_order
