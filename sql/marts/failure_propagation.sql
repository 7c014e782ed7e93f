-- failure_propagation: where each failure started and how far it travelled before it showed.
-- Grain: one row per failure annotation (graph_id, annotation_id).
-- Per partition: each row depends on one graph only, so the mart is computed per partition generation
--   (a rebuild recomputes the rebuilt partitions) and combined in order of system, dataset, graph_id, annotation_id.
--
-- Memory graphs: the faulty operation's session and phase, how many sessions separate it from the
-- session of the query node, and the shortest edge path from the faulty operation's outputs to the
-- prediction node of the failed query.
-- Multi-agent graphs: where the decisive step lies in the trajectory and whether the annotated
-- agent is the one who acted in it.
--
-- Columns:
--   graph_id, annotation_id    the annotation
--   system, dataset            the system and source dataset
--   graph_kind                 'memory' | 'multi_agent'
--   error_type, error_class    the label and its class ('memory' | 'non_memory' | 'unlabelled')
--   faulty_op_id               the decisive faulty operation (NULL when the label names none)
--   op_name, operation_type    its op_name and cross-system operation type (seed)
--   faulty_session_id          the session the faulty operation ran in
--   faulty_session_category    that session's category (memory_construction, memory_search, ...)
--   faulty_session_ordinal     that session's position in the graph (sessions.ordinal, from 0)
--   phase                      memory graphs: construction | search | answer | judge, first rule
--                              that applies: operation type judge -> judge; response -> answer;
--                              session memory_construction -> construction; memory_search ->
--                              search; operation type retrieval -> search; extraction, update,
--                              deletion, embedding, segmentation -> construction; session
--                              memory_evaluation -> answer; no faulty op and a non-memory label
--                              (AnnotationError: wrong reference, LLMAsAJudgeError: wrong judge)
--                              -> judge; otherwise NULL. NULL for multi-agent graphs.
--   query_id                   the query node of the annotation
--   query_session_id           the session the query node was recorded in
--   query_session_ordinal      that session's ordinal
--   session_distance           query_session_ordinal - faulty_session_ordinal (0 = same session;
--                              negative if the faulty op ran after the query's session)
--   sessions_between           sessions strictly between the two: greatest(|distance| - 1, 0); NULL when
--                              either session is unknown (no faulty operation)
--   prediction_node_id         the prediction node of the failed query, resolved by, in order:
--                              'prediction_id' (the annotation's prediction_id names a node of the
--                              graph), 'lineage' (a node of class_name 'prediction' that an
--                              operation reading the query node outputs (QA) or reads next to it
--                              (judge); several: the one whose value equals the annotated
--                              prediction, then the smallest id), 'value' (the only prediction node
--                              whose value equals the annotated prediction; values compared with
--                              one pair of enclosing quotes removed, see unquoted())
--   prediction_resolved_by     which rule resolved it; NULL when none did
--   hops_to_prediction         shortest number of edges from any output node of the faulty
--                              operation to the prediction node (0 = the operation produced the
--                              prediction); NULL when unreachable (e.g. a judge-phase fault: the
--                              judge reads the prediction, it does not produce it) or unknown
--   responsible_agent          multi-agent: the annotated mistake agent, as written
--   agent_role                 multi-agent: its role (seed)
--   decisive_step              multi-agent: the annotated 0-based mistake step
--   n_steps                    multi-agent: steps in the trajectory (operations of the graph)
--   decisive_position          multi-agent: decisive_step / (n_steps - 1), 0 = first step, 1 = last
--                              step; NULL when n_steps < 2
--   steps_after_decisive       multi-agent: n_steps - 1 - decisive_step, steps the error ran on
--   step_actor                 multi-agent: the agent who acted in the decisive step
--   agent_spoke_step           multi-agent: step_actor = responsible_agent (exact string match, as
--                              the official scorer compares); NULL when either is missing
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
                case when unquoted(n.value) = f.prediction then '0' else '1' end || n.full_node_id
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
          on n.graph_id = f.graph_id and n.class_name = 'prediction' and unquoted(n.value) = f.prediction
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
