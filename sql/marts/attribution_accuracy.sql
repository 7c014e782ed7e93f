-- attribution_accuracy: how often each failure-attribution method is right, per system and dataset.
-- Its grain, columns and tests are declared in _marts.yml.
-- Exact rules: error type and operation by string equality (memory cases); agent by same_agent()
-- (case and surrounding white space ignored) and step by integer equality (multi-agent cases). Legacy rules, as
-- Who&When's evaluate.py scores: the annotated agent (step, as text) is a substring of the predicted one.
-- A case is scored on a measure only where its annotation gives that measure's truth (an error type,
-- a faulty operation, a responsible agent, a decisive step): each accuracy is over the cases with that
-- truth (n_<measure>_cases; a case without a prediction counts as wrong), with a 95% Wilson interval,
-- and is NULL, as are its count and interval, where no case has it (a TRAIL-labelled trace names a
-- span and a category, no agent and no step).
with
    scored as (
        select
            method, system, dataset, graph_kind, predicted,
            graph_kind = 'memory' and error_type is not null as has_error_type,
            graph_kind = 'memory' and nullif(trim(faulty_op_id), '') is not null as has_op,
            graph_kind = 'multi_agent' and agent_key(responsible_agent) is not null as has_agent,
            graph_kind = 'multi_agent' and decisive_step is not null as has_step,
            coalesce(predicted_error_type = error_type, false) as error_type_hit,
            coalesce(predicted_op_id = faulty_op_id, false) as op_hit,
            coalesce(same_agent(predicted_agent, responsible_agent), false) as agent_hit,
            coalesce(predicted_step = decisive_step, false) as step_hit,
            coalesce(contains(predicted_agent, responsible_agent), false) as agent_legacy_hit,
            coalesce(contains(predicted_step::varchar, decisive_step::varchar), false) as step_legacy_hit
        from attribution_cases()
    ),
    counted as (
        select
            method, system, dataset,
            any_value(graph_kind) as graph_kind,
            count(*) as n_cases,
            count(*) filter (where predicted) as n_predicted,
            count(*) filter (where has_error_type) as n_error_type_cases,
            count(*) filter (where has_op) as n_op_cases,
            count(*) filter (where has_agent) as n_agent_cases,
            count(*) filter (where has_step) as n_step_cases,
            count(*) filter (where has_error_type and error_type_hit) as error_type_correct,
            count(*) filter (where has_op and op_hit) as op_correct,
            count(*) filter (where has_agent and agent_hit) as agent_correct,
            count(*) filter (where has_step and step_hit) as step_correct,
            count(*) filter (where has_agent and agent_legacy_hit) as agent_correct_legacy,
            count(*) filter (where has_step and step_legacy_hit) as step_correct_legacy
        from scored
        group by method, system, dataset
    ),
    typed as (  -- a measure no case has the truth of is not measured: NULL, not 0
        select
            method, system, dataset, graph_kind, n_cases, n_predicted,
            n_error_type_cases, n_op_cases, n_agent_cases, n_step_cases,
            case when n_error_type_cases > 0 then error_type_correct end as error_type_correct,
            case when n_op_cases > 0 then op_correct end as op_correct,
            case when n_agent_cases > 0 then agent_correct end as agent_correct,
            case when n_step_cases > 0 then step_correct end as step_correct,
            case when n_agent_cases > 0 then agent_correct_legacy end as agent_correct_legacy,
            case when n_step_cases > 0 then step_correct_legacy end as step_correct_legacy
        from counted
    )
select
    *,
    error_type_correct / n_error_type_cases as error_type_accuracy,
    wilson_low(error_type_correct, n_error_type_cases) as error_type_ci_low,
    wilson_high(error_type_correct, n_error_type_cases) as error_type_ci_high,
    op_correct / n_op_cases as op_accuracy,
    wilson_low(op_correct, n_op_cases) as op_ci_low,
    wilson_high(op_correct, n_op_cases) as op_ci_high,
    agent_correct / n_agent_cases as agent_accuracy,
    wilson_low(agent_correct, n_agent_cases) as agent_ci_low,
    wilson_high(agent_correct, n_agent_cases) as agent_ci_high,
    step_correct / n_step_cases as step_accuracy,
    wilson_low(step_correct, n_step_cases) as step_ci_low,
    wilson_high(step_correct, n_step_cases) as step_ci_high,
    agent_correct_legacy / n_agent_cases as agent_accuracy_legacy,
    wilson_low(agent_correct_legacy, n_agent_cases) as agent_legacy_ci_low,
    wilson_high(agent_correct_legacy, n_agent_cases) as agent_legacy_ci_high,
    step_correct_legacy / n_step_cases as step_accuracy_legacy,
    wilson_low(step_correct_legacy, n_step_cases) as step_legacy_ci_low,
    wilson_high(step_correct_legacy, n_step_cases) as step_legacy_ci_high
from typed
order by method, system, dataset
