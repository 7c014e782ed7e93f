-- failure_propagation: where each failure started and how far it travelled before it showed.
-- Its grain, columns and tests are declared in _marts.yml.
--
-- Memory graphs: the faulty operation's session and phase, how many sessions separate it from the
-- session of the query node, and the shortest edge path from the faulty operation's outputs to the
-- prediction node of the failed query.
-- Multi-agent graphs: where the decisive step lies in the trajectory and whether the annotated
-- agent is the one who acted in it.
-- Prediction values are compared through nodes.value_short (the value when at most 256 bytes), so
-- the mart never scans the long values; a longer prediction is found by its id or its lineage.
with recursive
    f as (select * from failures()),
    session_of as (
        select s.graph_id, s.session_id, s.category, s.ordinal from sessions s
        where s.graph_id in (select graph_id from f)
    ),
    query_session as (
        select f.annotation_id, n.session_id
        from f
        join nodes n on n.graph_id = f.graph_id and n.full_node_id = f.query_id
    ),
    -- prediction node, rule 1: the annotation's own prediction_id
    by_id as (
        select f.annotation_id, n.full_node_id
        from f
        join nodes n on n.graph_id = f.graph_id and n.full_node_id = (try_cast(f.extra as json) ->> 'prediction_id')
        where f.graph_kind = 'memory' and f.extra is not null
    ),
    -- rule 2: prediction nodes next to the query node through one operation (QA output, judge co-input)
    query_ops as (
        select distinct f.annotation_id, f.graph_id, e.op_id
        from f
        join edges e on e.graph_id = f.graph_id and e.source_full_node_id = f.query_id
        where f.graph_kind = 'memory'
    ),
    near_query as (
        select q.annotation_id, q.graph_id, e.target_full_node_id as full_node_id
        from query_ops q join edges e on e.graph_id = q.graph_id and e.op_id = q.op_id
        union
        select q.annotation_id, q.graph_id, e.source_full_node_id as full_node_id
        from query_ops q join edges e on e.graph_id = q.graph_id and e.op_id = q.op_id
    ),
    by_lineage as (
        select
            nq.annotation_id,
            arg_min(
                n.full_node_id,
                case when unquoted(n.value_short) = f.prediction then '0' else '1' end || n.full_node_id
            ) as full_node_id
        from near_query nq
        join nodes n on n.graph_id = nq.graph_id and n.full_node_id = nq.full_node_id
        join f on f.annotation_id = nq.annotation_id
        where n.class_name = 'prediction'
        group by nq.annotation_id
    ),
    -- rule 3: the only prediction node holding the annotated prediction
    by_value as (
        select f.annotation_id, any_value(n.full_node_id) as full_node_id
        from f
        join nodes n
          on n.graph_id = f.graph_id and n.class_name = 'prediction' and unquoted(n.value_short) = f.prediction
        where f.graph_kind = 'memory'
        group by f.annotation_id
        having count(*) = 1
    ),
    resolved as (
        select
            f.annotation_id,
            f.graph_id,
            f.faulty_op_id,
            coalesce(i.full_node_id, l.full_node_id, v.full_node_id) as prediction_node_id,
            case
                when i.full_node_id is not null then 'prediction_id'
                when l.full_node_id is not null then 'lineage'
                when v.full_node_id is not null then 'value'
            end as prediction_resolved_by
        from f
        left join by_id i using (annotation_id)
        left join by_lineage l using (annotation_id)
        left join by_value v using (annotation_id)
    ),
    -- shortest paths, walked forward from the outputs of each distinct faulty operation (what an
    -- operation influenced is usually far smaller than everything a prediction depends on)
    sources as (
        select distinct graph_id, faulty_op_id
        from resolved
        where prediction_node_id is not null and faulty_op_id is not null
    ),
    walk_edges as materialized (
        select e.graph_id, e.source_full_node_id as src, e.target_full_node_id as dst
        from edges e
        where e.graph_id in (select graph_id from sources) and e.source_full_node_id <> e.target_full_node_id
    ),
    walk(graph_id, faulty_op_id, full_node_id, hops) using key (graph_id, faulty_op_id, full_node_id) as (
        select s.graph_id, s.faulty_op_id, e.target_full_node_id, 0
        from sources s
        join edges e on e.graph_id = s.graph_id and e.op_id = s.faulty_op_id
        union
        select w.graph_id, w.faulty_op_id, e.dst, w.hops + 1
        from walk w
        join walk_edges e on e.graph_id = w.graph_id and e.src = w.full_node_id
        where not exists (
            select 1 from recurring.walk seen
            where seen.graph_id = w.graph_id
              and seen.faulty_op_id = w.faulty_op_id
              and seen.full_node_id = e.dst
        )
    ),
    hops as (
        select r.annotation_id, w.hops::bigint as hops_to_prediction
        from resolved r
        join walk w
          on w.graph_id = r.graph_id and w.faulty_op_id = r.faulty_op_id and w.full_node_id = r.prediction_node_id
    ),
    steps as (
        select o.graph_id, count(*) as n_steps
        from operations o
        where o.graph_id in (select graph_id from f where graph_kind = 'multi_agent')
        group by o.graph_id
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
    f.operation_type,
    f.op_session_id as faulty_session_id,
    fs.category as faulty_session_category,
    fs.ordinal as faulty_session_ordinal,
    case
        when f.graph_kind <> 'memory' then null
        when f.operation_type = 'judge' then 'judge'
        when f.operation_type = 'response' then 'answer'
        when fs.category = 'memory_construction' then 'construction'
        when fs.category = 'memory_search' then 'search'
        when f.operation_type = 'retrieval' then 'search'
        when f.operation_type in ('extraction', 'update', 'deletion', 'embedding', 'segmentation') then 'construction'
        when fs.category = 'memory_evaluation' then 'answer'
        when f.faulty_op_id is null and f.error_class = 'non_memory' then 'judge'
    end as phase,
    f.query_id,
    qs.session_id as query_session_id,
    qss.ordinal as query_session_ordinal,
    qss.ordinal - fs.ordinal as session_distance,
    -- greatest() skips NULLs, so say NULL explicitly when either session is unknown
    case when qss.ordinal is null or fs.ordinal is null then null
         else greatest(abs(qss.ordinal - fs.ordinal) - 1, 0) end as sessions_between,
    r.prediction_node_id,
    r.prediction_resolved_by,
    h.hops_to_prediction,
    f.responsible_agent,
    f.agent_role,
    f.decisive_step,
    st.n_steps,
    case when st.n_steps > 1 then f.decisive_step / (st.n_steps - 1) end as decisive_position,
    st.n_steps - 1 - f.decisive_step as steps_after_decisive,
    case when f.graph_kind = 'multi_agent' then f.step_actor end as step_actor,
    case when f.graph_kind = 'multi_agent' then f.step_actor = f.responsible_agent end as agent_spoke_step
from f
left join session_of fs on fs.graph_id = f.graph_id and fs.session_id = f.op_session_id
left join query_session qs on qs.annotation_id = f.annotation_id
left join session_of qss on qss.graph_id = f.graph_id and qss.session_id = qs.session_id
left join resolved r on r.annotation_id = f.annotation_id
left join hops h on h.annotation_id = f.annotation_id
left join steps st on st.graph_id = f.graph_id
order by f.system, f.dataset, f.graph_id, f.annotation_id
