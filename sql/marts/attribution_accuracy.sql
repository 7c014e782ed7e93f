-- attribution_accuracy: how often each failure-attribution method is right, per system and dataset.
-- Its grain, columns and tests are declared in _marts.yml.
-- Exact rules: error type and operation by string equality (memory cases); agent by string equality
-- and step by integer equality (multi-agent cases). Legacy rules, as Who&When's evaluate.py scores:
-- the annotated agent (step, as text) is a substring of the predicted one. Every accuracy is over
-- n_cases (a case without a prediction counts as wrong), with a 95% Wilson interval.
with
    scored as (
        select
            method, system, dataset, graph_kind, predicted,
            graph_kind = 'memory' and predicted_error_type = error_type as error_type_hit,
            graph_kind = 'memory' and predicted_op_id = faulty_op_id as op_hit,
            graph_kind = 'multi_agent' and predicted_agent = responsible_agent as agent_hit,
            graph_kind = 'multi_agent' and predicted_step = decisive_step as step_hit,
            graph_kind = 'multi_agent' and contains(predicted_agent, responsible_agent) as agent_legacy_hit,
            graph_kind = 'multi_agent' and contains(predicted_step::varchar, decisive_step::varchar) as step_legacy_hit
        from attribution_cases()
    ),
    counted as (
        select
            method, system, dataset,
            any_value(graph_kind) as graph_kind,
            count(*) as n_cases,
            count(*) filter (where predicted) as n_predicted,
            count(*) filter (where coalesce(error_type_hit, false)) as error_type_correct,
            count(*) filter (where coalesce(op_hit, false)) as op_correct,
            count(*) filter (where coalesce(agent_hit, false)) as agent_correct,
            count(*) filter (where coalesce(step_hit, false)) as step_correct,
            count(*) filter (where coalesce(agent_legacy_hit, false)) as agent_correct_legacy,
            count(*) filter (where coalesce(step_legacy_hit, false)) as step_correct_legacy
        from scored
        group by method, system, dataset
    ),
    typed as (
        select
            method, system, dataset, graph_kind, n_cases, n_predicted,
            case when graph_kind = 'memory' then error_type_correct end as error_type_correct,
            case when graph_kind = 'memory' then op_correct end as op_correct,
            case when graph_kind = 'multi_agent' then agent_correct end as agent_correct,
            case when graph_kind = 'multi_agent' then step_correct end as step_correct,
            case when graph_kind = 'multi_agent' then agent_correct_legacy end as agent_correct_legacy,
            case when graph_kind = 'multi_agent' then step_correct_legacy end as step_correct_legacy
        from counted
    )
select
    *,
    error_type_correct / n_cases as error_type_accuracy,
    wilson_low(error_type_correct, n_cases) as error_type_ci_low,
    wilson_high(error_type_correct, n_cases) as error_type_ci_high,
    op_correct / n_cases as op_accuracy,
    wilson_low(op_correct, n_cases) as op_ci_low,
    wilson_high(op_correct, n_cases) as op_ci_high,
    agent_correct / n_cases as agent_accuracy,
    wilson_low(agent_correct, n_cases) as agent_ci_low,
    wilson_high(agent_correct, n_cases) as agent_ci_high,
    step_correct / n_cases as step_accuracy,
    wilson_low(step_correct, n_cases) as step_ci_low,
    wilson_high(step_correct, n_cases) as step_ci_high,
    agent_correct_legacy / n_cases as agent_accuracy_legacy,
    wilson_low(agent_correct_legacy, n_cases) as agent_legacy_ci_low,
    wilson_high(agent_correct_legacy, n_cases) as agent_legacy_ci_high,
    step_correct_legacy / n_cases as step_accuracy_legacy,
    wilson_low(step_correct_legacy, n_cases) as step_legacy_ci_low,
    wilson_high(step_correct_legacy, n_cases) as step_legacy_ci_high
from typed
order by method, system, dataset
