-- failures() -> one row per failure annotation, joined to what the failure marts group by.
-- The shared staging step of sql/marts/failure_*.sql; call it to slice failures your own way.
--
-- Columns:
--   graph_id, annotation_id     the annotation (grain)
--   source, system, dataset     from graphs
--   graph_kind                  'memory' | 'multi_agent' (see graph_kinds())
--   error_type                  the annotated label as written; null for sources that label an agent
--                               and a step, not an error type (Who&When, TracerTraj)
--   error_label                 its canonical spelling (error_label(): one label for the spellings
--                               of one category); what the failure marts count
--   error_class                 'memory' | 'non_memory' | 'unlabelled' (see error_class()); a label of
--                               another taxonomy than MemTraceBench's (AgentRx, TRAIL) is non_memory
--   taxonomy, is_root_cause     the label's taxonomy; whether the source names it the run's root cause
--   faulty_op_id                the decisive faulty operation (null for labels without one)
--   op_name, op_category        that operation's name and category
--   op_session_id               that operation's session
--   step_actor                  the agent who acted in that operation (multi-agent only)
--   operation_type              cross-system type of that operation (seed operation_types.csv)
--   responsible_agent           multi-agent: the annotated mistake agent, as written (compare it with
--                               same_agent(), group it by agent_key())
--   agent_role                  its role (seed rows kind = 'agent')
--   decisive_step               multi-agent: the annotated 0-based mistake step
--   query_id, prediction, extra the annotation's query node, predicted answer, extra keys (JSON)

create or replace macro failures() as table
select
    a.graph_id,
    a.annotation_id,
    k.source,
    a.system,
    a.dataset,
    k.graph_kind,
    a.error_type,
    error_label(a.taxonomy, a.error_type) as error_label,
    -- a label of another taxonomy (AgentRx, TRAIL) is no memory-system error: non_memory
    case
        when a.taxonomy is not null and a.taxonomy <> 'memtracebench' then 'non_memory'
        else error_class(error_label(a.taxonomy, a.error_type))
    end as error_class,
    a.taxonomy,
    a.is_root_cause,
    a.faulty_op_id,
    o.op_name,
    o.category as op_category,
    o.session_id as op_session_id,
    o.actor as step_actor,
    case when o.op_id is not null then operation_type(a.system, o.op_name, o.category) end as operation_type,
    a.responsible_agent,
    agent_role(a.system, a.responsible_agent) as agent_role,
    a.decisive_step,
    a.query_id,
    a.prediction,
    a.extra
from annotations a
join graph_kinds() k using (graph_id)
left join operations o on o.graph_id = a.graph_id and o.op_id = a.faulty_op_id;
