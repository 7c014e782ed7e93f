-- annotation: what the drill-down picture of one annotation says about it, and where its path ends.
-- Grain: one row per graph holding an annotation with this id (annotation ids embed their graph id,
-- so normally one). Parameters: $annotation_id.
-- Columns:
--   graph_id, annotation_id, system, dataset, graph_kind, error_type   the annotation
--   faulty_op_id, op_name, operation_type, phase                        the decisive faulty operation
--   query_id, query, reason                                             the failed query and the label's reason
--   prediction_node_id, hops_to_prediction                              from failure_propagation
--   responsible_agent, decisive_step, n_steps                           multi-agent annotations
--   final_node_id      multi-agent graphs (no prediction node): the output node of the trajectory's last
--                      step, where the path drawn from the faulty step ends; NULL otherwise
select
    f.graph_id,
    f.annotation_id,
    f.system,
    f.dataset,
    f.graph_kind,
    f.error_type,
    f.faulty_op_id,
    f.op_name,
    f.operation_type,
    f.phase,
    f.query_id,
    a.query,
    a.reason,
    f.prediction_node_id,
    f.hops_to_prediction,
    f.responsible_agent,
    f.decisive_step,
    f.n_steps,
    case when f.graph_kind = 'multi_agent' and f.prediction_node_id is null then (
        select e.target_full_node_id
        from edges e
        join operations o on o.graph_id = e.graph_id and o.op_id = e.op_id
        where e.graph_id = f.graph_id
        order by o.step desc, e.target_full_node_id
        limit 1
    ) end as final_node_id
from failure_propagation f
left join annotations a on a.graph_id = f.graph_id and a.annotation_id = f.annotation_id
where f.annotation_id = $annotation_id
order by f.graph_id
