-- attribution_cases(): the cases every attribution method is scored on, with its prediction (if
-- any). One row per (method, case). Declared in _macros.yml; used by the attribution_* marts.
--
-- A method's cases are the annotations of the graphs its run covered (attribution_scope): for a
-- memory graph, those with a memory error type (seed error_types, class memory); for a multi-agent
-- graph, every annotation. A case the method did not predict counts as wrong (predicted = false),
-- as in both benchmarks' scorers. Two built-in baselines are scored on every case of their kind:
-- baseline:response (memory: the question-answering operation, which reads the query node and
-- writes a prediction node, as a ResponseError) and baseline:last_step (multi-agent: the agent and index of the last step).
create or replace macro attribution_cases() as table
with
    kinds as (select * from graph_kinds()),
    memory_types as (select error_type from error_types where error_class = 'memory'),
    truth as (
        select a.graph_id, a.annotation_id, k.system, k.dataset, k.graph_kind, a.error_type, a.faulty_op_id,
               a.responsible_agent, a.decisive_step
        from annotations a
        join kinds k using (graph_id)
        where (k.graph_kind = 'memory' and a.error_type in (select error_type from memory_types))
           or k.graph_kind = 'multi_agent'
    ),
    scoped as (
        select distinct s.method, t.*
        from attribution_scope s
        join truth t using (graph_id)
    ),
    method_cases as (
        select
            c.*,
            p.annotation_id is not null as predicted,
            p.predicted_error_type, p.predicted_op_id, p.predicted_agent, p.predicted_step
        from scoped c
        left join attributions p on p.method = c.method and p.annotation_id = c.annotation_id
    ),
    answer_op as (  -- the question-answering operation: it reads the query node and writes a prediction
        select t.annotation_id, min(e_in.op_id) as op_id
        from truth t
        join annotations a using (graph_id, annotation_id)
        join edges e_in on e_in.graph_id = t.graph_id and e_in.source_full_node_id = a.query_id
        join edges e_out on e_out.graph_id = t.graph_id and e_out.op_id = e_in.op_id
        join nodes n on n.graph_id = t.graph_id and n.full_node_id = e_out.target_full_node_id
        where t.graph_kind = 'memory' and n.class_name = 'prediction'
        group by t.annotation_id
    ),
    last_step as (
        select graph_id, arg_max(actor, step) as actor, max(step) as step
        from operations
        where graph_id in (select graph_id from truth where graph_kind = 'multi_agent')
        group by graph_id
    ),
    baselines as (
        select 'baseline:response' as method, t.*, r.op_id is not null as predicted,
               case when r.op_id is not null then 'ResponseError' end as predicted_error_type,
               r.op_id as predicted_op_id, null::varchar as predicted_agent, null::bigint as predicted_step
        from truth t left join answer_op r using (annotation_id)
        where t.graph_kind = 'memory'
        union all
        select 'baseline:last_step', t.*, l.graph_id is not null,
               null, null, l.actor, l.step
        from truth t left join last_step l using (graph_id)
        where t.graph_kind = 'multi_agent'
    )
select * from method_cases
union all
select * from baselines;

-- trail_category(label): a TRAIL category as TRAIL's scorer (benchmarking/calculate_scores.py,
-- normalize_category) reads it: the leaf of the seed taxonomy_crosswalk (taxonomy 'trail') equal to it
-- ignoring case, surrounding and inner spaces; else the first leaf (alphabetically) that contains it
-- so folded; else the label lower-cased and trimmed. NULL for NULL or an empty label.
create or replace macro trail_category(label) as (
    case
        when label is null or trim(label) = '' then null
        else coalesce(
            (select min(c.label) from taxonomy_crosswalk c
             where c.taxonomy = 'trail'
               and (lower(c.label) = lower(trim(label))
                    or replace(lower(c.label), ' ', '') = replace(lower(trim(label)), ' ', ''))),
            (select min(c.label) from taxonomy_crosswalk c
             where c.taxonomy = 'trail'
               and contains(replace(lower(c.label), ' ', ''), replace(lower(trim(label)), ' ', ''))),
            lower(trim(label))
        )
    end
);

-- agentrx_failure_case(label): the AgentRx failure case a category label names, as AgentRx's judge
-- (agentrx/judge/judge.py, convert_to_failure_case) reads one: its number 0-10 as written, else the
-- first of its key-word rules that matches the lower-cased label, else Inconclusive (its fallback).
-- NULL for NULL.
create or replace macro agentrx_failure_case(label) as (
    case
        when label is null then null
        when regexp_full_match(trim(label), '-?[0-9]+') then
            case trim(label)::bigint
                when 0 then 'No Error Predicted'
                when 1 then 'Instruction/Plan Adherence Failure'
                when 2 then 'Invention of New Information'
                when 3 then 'Invalid Invocation'
                when 4 then 'Misinterpretation of Tool Output'
                when 5 then 'Intent-Plan Misalignment'
                when 6 then 'Underspecified User Intent'
                when 7 then 'Intent Not Supported'
                when 8 then 'Guardrails Triggered'
                when 9 then 'System Failure'
                else 'Inconclusive'
            end
        when contains(lower(label), 'instruction') and contains(lower(label), 'adherence')
            then 'Instruction/Plan Adherence Failure'
        when contains(lower(label), 'invention') and contains(lower(label), 'information')
            then 'Invention of New Information'
        when contains(lower(label), 'invalid') and contains(lower(label), 'invocation') then 'Invalid Invocation'
        when contains(lower(label), 'misinterpretation') or contains(lower(label), 'handoff')
            then 'Misinterpretation of Tool Output'
        when contains(lower(label), 'intent') and contains(lower(label), 'misalignment')
            then 'Intent-Plan Misalignment'
        when contains(lower(label), 'underspecified') then 'Underspecified User Intent'
        when contains(lower(label), 'unsupported')
             or (contains(lower(label), 'intent') and contains(lower(label), 'not supported'))
            then 'Intent Not Supported'
        when contains(lower(label), 'guardrail') then 'Guardrails Triggered'
        when contains(lower(label), 'system') and contains(lower(label), 'failure') then 'System Failure'
        else 'Inconclusive'
    end
);
