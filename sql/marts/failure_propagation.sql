-- failure_propagation: where each failure started and how far it travelled before it showed.
-- Its grain, columns and tests are declared in _marts.yml.
--
-- Memory graphs: the faulty operation's session and phase, how many sessions separate it from the
-- session of the query node, and the shortest edge path from the faulty operation's outputs to the
-- prediction node of the failed query.
-- Multi-agent graphs: where the decisive step lies in the trajectory and whether the annotated
-- agent is the one who acted in it (same_agent(): case and surrounding white space ignored, as AgentRx labels the
-- tau-bench agent `Assistant` whose messages' role is `assistant`).
-- Prediction values are compared through nodes.value_short (the value when at most 256 bytes), so
-- the mart never scans the long values; a longer prediction is found by its id or its lineage.
--
-- Cost (at 10 M nodes, bench/run.py): nodes and edges are each read for one purpose once (the query
-- and prediction_id nodes in one pass, the prediction nodes once, the query's and the faulty
-- operations' edges in one pass). The walk is a plain UNION recursion over (walk, graph_key,
-- node_index, hops), integers all, as in attribution_op_distance: a round extends only the rows the
-- round before added, so it costs the rows it finds (1.5 per node reached on the benchmark corpus),
-- not a keyed walk whose check against everything found so far re-read all walks every round (143
-- rounds there: about 24 s of the 37 s this mart took then). hops is the least length found; a walk
-- stops at its graph's count of edges, which no shortest path exceeds, so a cycle ends too.
with recursive
    f as (select * from failures()),
    -- the columns of the failures the walk and the prediction rules read, from annotations itself:
    -- DuckDB's estimate of failures() (tens of millions of rows at 10 M nodes, for 0.1 M) made it
    -- build its hash tables on the 14 M edges instead of on these keys (4.3 s of CPU)
    fa as materialized (
        select a.graph_id, a.annotation_id, k.graph_kind, a.faulty_op_id, a.query_id, a.prediction, a.extra
        from annotations a join graph_kinds() k using (graph_id)
    ),
    session_of as (
        select s.graph_id, s.session_id, s.category, s.ordinal from sessions s
        where s.graph_id in (select graph_id from fa f)
    ),
    -- the query node of each failure (for its session) and its prediction_id's node: one pass over nodes
    named_nodes as materialized (
        select k.annotation_id, k.role, n.full_node_id, n.node_index, n.session_id
        from (
            select annotation_id, graph_id, query_id as full_node_id, 'query' as role from fa f
            union all
            select annotation_id, graph_id, try_cast(extra as json) ->> 'prediction_id', 'prediction' from fa f
            where graph_kind = 'memory' and extra is not null
        ) k
        join nodes n on n.graph_id = k.graph_id and n.full_node_id = k.full_node_id
    ),
    query_session as (
        select annotation_id, session_id from named_nodes where role = 'query'
    ),
    predictions as materialized (  -- the prediction nodes of the failed queries' graphs, read once
        select n.graph_id, n.full_node_id, n.node_index, n.value_short
        from nodes n
        where n.class_name = 'prediction' and n.graph_id in (select graph_id from fa f where graph_kind = 'memory')
    ),
    -- prediction node, rule 1: the annotation's own prediction_id
    by_id as (
        select annotation_id, full_node_id, node_index from named_nodes where role = 'prediction'
    ),
    -- rule 2: prediction nodes next to the query node through one operation (QA output, judge co-input)
    query_ops as (
        select distinct f.annotation_id, f.graph_id, e.op_id
        from fa f
        join edges e on e.graph_id = f.graph_id and e.source_full_node_id = f.query_id
        where f.graph_kind = 'memory'
    ),
    -- the edges of the query nodes' operations and of the faulty operations: one pass over edges
    op_edges as materialized (
        select e.graph_id, e.op_id, e.source_full_node_id, e.target_full_node_id, e.graph_key, e.target_node_index
        from edges e
        semi join (
            select graph_id, op_id from query_ops
            union
            select graph_id, faulty_op_id from fa f where faulty_op_id is not null
        ) k on k.graph_id = e.graph_id and k.op_id = e.op_id
    ),
    query_op_edges as (
        select q.annotation_id, q.graph_id, e.source_full_node_id, e.target_full_node_id
        from query_ops q join op_edges e on e.graph_id = q.graph_id and e.op_id = q.op_id
    ),
    near_query as (
        select annotation_id, graph_id, target_full_node_id as full_node_id from query_op_edges
        union
        select annotation_id, graph_id, source_full_node_id as full_node_id from query_op_edges
    ),
    by_lineage as (  -- one node: the order ends with full_node_id, unique in its graph
        select annotation_id, arg_min(full_node_id, pick) as full_node_id, arg_min(node_index, pick) as node_index
        from (
            select
                nq.annotation_id, n.full_node_id, n.node_index,
                case when unquoted(n.value_short) = f.prediction then '0' else '1' end || n.full_node_id as pick
            from near_query nq
            join predictions n on n.graph_id = nq.graph_id and n.full_node_id = nq.full_node_id
            join fa f on f.annotation_id = nq.annotation_id
        )
        group by annotation_id
    ),
    -- rule 3: the only prediction node holding the annotated prediction
    by_value as (
        select f.annotation_id, any_value(n.full_node_id) as full_node_id, any_value(n.node_index) as node_index
        from fa f
        join predictions n on n.graph_id = f.graph_id and unquoted(n.value_short) = f.prediction
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
            coalesce(i.node_index, l.node_index, v.node_index) as prediction_node_index,
            case
                when i.full_node_id is not null then 'prediction_id'
                when l.full_node_id is not null then 'lineage'
                when v.full_node_id is not null then 'value'
            end as prediction_resolved_by
        from fa f
        left join by_id i using (annotation_id)
        left join by_lineage l using (annotation_id)
        left join by_value v using (annotation_id)
    ),
    -- shortest paths, walked forward from the outputs of each distinct faulty operation (what an
    -- operation influenced is usually far smaller than everything a prediction depends on); every
    -- graph's edges are kept: filtering them by the graphs with a failure cost 2.5 s of CPU at 10 M
    -- nodes and removed none (at scale nearly every graph has one). The walk joins on integers
    -- written at ingest (graph_key, node_index): on (graph_id, full_node_id) strings it cost a
    -- third more at 10 M nodes (BENCHMARKS.md).
    --
    -- Each distinct faulty operation to walk from, numbered; materialized, so that the walk and
    -- hops read the same numbers (row_number() over () numbers in no set order).
    sources as materialized (
        select graph_id, faulty_op_id, row_number() over () as walk_id
        from (
            select distinct graph_id, faulty_op_id
            from resolved
            where prediction_node_id is not null and faulty_op_id is not null
        )
    ),
    walk_edges as materialized (
        select e.graph_key, e.source_node_index as src, e.target_node_index as dst
        from edges e
        where e.source_node_index <> e.target_node_index
    ),
    bounds as (  -- a shortest path uses each edge at most once
        select graph_key, count(*) as max_hops from walk_edges group by graph_key
    ),
    walk(walk_id, graph_key, node_index, hops, max_hops) as (
        select s.walk_id, e.graph_key, e.target_node_index, 0, coalesce(b.max_hops, 0)
        from sources s
        join op_edges e on e.graph_id = s.graph_id and e.op_id = s.faulty_op_id
        left join bounds b on b.graph_key = e.graph_key
        union
        select w.walk_id, w.graph_key, e.dst, w.hops + 1, w.max_hops
        from walk w
        join walk_edges e on e.graph_key = w.graph_key and e.src = w.node_index
        where w.hops < w.max_hops
    ),
    hops as (
        select r.annotation_id, min(w.hops)::bigint as hops_to_prediction
        from resolved r
        join sources s on s.graph_id = r.graph_id and s.faulty_op_id = r.faulty_op_id
        join walk w on w.walk_id = s.walk_id and w.node_index = r.prediction_node_index
        group by r.annotation_id
    ),
    steps as (
        select o.graph_id, count(*) as n_steps
        from operations o
        where o.graph_id in (select graph_id from fa f where graph_kind = 'multi_agent')
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
    case when f.graph_kind = 'multi_agent' then same_agent(f.step_actor, f.responsible_agent) end as agent_spoke_step
from f
left join session_of fs on fs.graph_id = f.graph_id and fs.session_id = f.op_session_id
left join query_session qs on qs.annotation_id = f.annotation_id
left join session_of qss on qss.graph_id = f.graph_id and qss.session_id = qs.session_id
left join resolved r on r.annotation_id = f.annotation_id
left join hops h on h.annotation_id = f.annotation_id
left join steps st on st.graph_id = f.graph_id
order by f.system, f.dataset, f.graph_id, f.annotation_id
