-- attribution_leaderboard: failure-attribution methods side by side, per system: how often each
-- names the faulty operation and the error type (memory systems), or the responsible agent and the
-- decisive step (multi-agent), with 95% Wilson intervals. From the attribution_accuracy mart,
-- summed over datasets; baselines (baseline:*) are scored like any method.
-- Grain: one row per (method, system, metric).
-- Columns:
--   method        the attribution method (NAME of its --source), or baseline:response / baseline:last_step
--   system        the system
--   graph_kind    'memory' | 'multi_agent'
--   metric        'faulty operation' | 'error type' | 'responsible agent' | 'decisive step'
--   correct       cases the method got right on this metric
--   n_cases       failure annotations the method is scored on (a missing prediction counts as wrong)
--   accuracy      correct / n_cases
--   ci_low        95% Wilson interval of accuracy
--   ci_high
--   is_baseline   true for the built-in baselines
with per_system as (
    select method, system, any_value(graph_kind) as graph_kind, sum(n_cases) as n_cases,
           sum(op_correct) as op_correct, sum(error_type_correct) as error_type_correct,
           sum(agent_correct) as agent_correct, sum(step_correct) as step_correct
    from attribution_accuracy
    group by method, system
),
scored as (
    select method, system, graph_kind, 'faulty operation' as metric, op_correct as correct, n_cases
    from per_system where graph_kind = 'memory'
    union all
    select method, system, graph_kind, 'error type', error_type_correct, n_cases
    from per_system where graph_kind = 'memory'
    union all
    select method, system, graph_kind, 'responsible agent', agent_correct, n_cases
    from per_system where graph_kind = 'multi_agent'
    union all
    select method, system, graph_kind, 'decisive step', step_correct, n_cases
    from per_system where graph_kind = 'multi_agent'
)
select
    method,
    system,
    graph_kind,
    metric,
    correct::bigint as correct,
    n_cases::bigint as n_cases,
    correct / n_cases as accuracy,
    wilson_low(correct, n_cases) as ci_low,
    wilson_high(correct, n_cases) as ci_high,
    starts_with(method, 'baseline:') as is_baseline
from scored
where n_cases > 0 and correct is not null
order by system, metric, method
