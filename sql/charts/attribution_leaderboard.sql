-- attribution_leaderboard: failure-attribution methods side by side, per system: how often each
-- names the faulty operation and the error type (memory systems), or the responsible agent and the
-- decisive step (multi-agent), with 95% Wilson intervals. From the attribution_accuracy mart,
-- summed over datasets; baselines (baseline:*) are scored like any method. Beside them, each
-- benchmark's own scores where its labels are loaded: TRAIL's (attribution_trail_scores: location
-- accuracy, weighted category F1, joint accuracy, per-trace means: no interval) and AgentRx's
-- (attribution_agentrx_scores: root-cause step, failure case and agent, with Wilson intervals). Those
-- are per dataset (TRAIL scores each split on its own; an F1 does not add up): the metric names the
-- dataset when the system has several.
-- Grain: one row per (method, system, metric).
-- Columns:
--   method        the attribution method (NAME of its --source), or baseline:response / baseline:last_step
--   system        the system
--   graph_kind    'memory' | 'multi_agent'
--   metric        'faulty operation' | 'error type' | 'responsible agent' | 'decisive step'
--                 | 'TRAIL location' | 'TRAIL category F1' | 'TRAIL joint' | 'AgentRx root-cause step'
--                 | 'AgentRx failure case' | 'AgentRx agent' (then ' · <dataset>' when the system has several)
--   correct       cases the method got right on this metric (NULL for TRAIL's means and F1)
--   n_cases       failure annotations the method is scored on for the metric: those whose annotation
--                 gives its truth (a missing prediction counts as wrong); TRAIL: traces scored;
--                 AgentRx: trajectories predicted with the field. A metric with none has no row.
--   accuracy      correct / n_cases; TRAIL: its score
--   ci_low        95% Wilson interval of accuracy (NULL for TRAIL's scores)
--   ci_high
--   is_baseline   true for the built-in baselines
--   reported      what the benchmark's paper reports for the same benchmark, split, metric and method
--                 (attribution_published, seed published_results); NULL when nothing matches
--   comparability 'comparable: ...' or 'not comparable: <why>' where the benchmark has reported numbers
with per_system as (
    select method, system, any_value(graph_kind) as graph_kind,
           sum(n_op_cases) as n_op_cases, sum(n_error_type_cases) as n_error_type_cases,
           sum(n_agent_cases) as n_agent_cases, sum(n_step_cases) as n_step_cases,
           sum(op_correct) as op_correct, sum(error_type_correct) as error_type_correct,
           sum(agent_correct) as agent_correct, sum(step_correct) as step_correct
    from attribution_accuracy
    group by method, system
),
scored as (  -- a metric no case has the truth of (a TRAIL trace's agent and step) has no row
    select method, system, graph_kind, 'faulty operation' as metric, op_correct as correct, n_op_cases as n_cases
    from per_system where graph_kind = 'memory'
    union all
    select method, system, graph_kind, 'error type', error_type_correct, n_error_type_cases
    from per_system where graph_kind = 'memory'
    union all
    select method, system, graph_kind, 'responsible agent', agent_correct, n_agent_cases
    from per_system where graph_kind = 'multi_agent'
    union all
    select method, system, graph_kind, 'decisive step', step_correct, n_step_cases
    from per_system where graph_kind = 'multi_agent'
),
benchmark_rows as (
    select method, system, dataset, metric, correct::double as correct, n_cases, score
    from attribution_trail_scores,
    lateral (values
        ('TRAIL location', null, n_traces_location, location_accuracy),
        ('TRAIL category F1', null, n_traces_category, category_f1),
        ('TRAIL joint', null, n_traces_joint, joint_accuracy)
    ) as v(metric, correct, n_cases, score)
    union all
    select method, system, dataset, metric, correct, n_cases, correct / nullif(n_cases, 0)
    from attribution_agentrx_scores,
    lateral (values
        ('AgentRx root-cause step', step_correct, n_step),
        ('AgentRx failure case', category_correct, n_category),
        ('AgentRx agent', agent_correct, n_agent)
    ) as v(metric, correct, n_cases)
),
datasets as (
    select system, count(distinct dataset) as n_datasets from benchmark_rows group by system
),
benchmarks as (
    select
        b.method, b.system, 'multi_agent' as graph_kind,
        b.metric || case when d.n_datasets > 1 then ' · ' || b.dataset else '' end as metric,
        b.correct, b.n_cases, b.score
    from benchmark_rows b
    join datasets d using (system)
    where b.score is not null and b.n_cases > 0
),
board as (
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
union all
select
    method,
    system,
    graph_kind,
    metric,
    correct::bigint,
    n_cases::bigint,
    score,
    case when correct is not null then wilson_low(correct, n_cases) end,
    case when correct is not null then wilson_high(correct, n_cases) end,
    starts_with(method, 'baseline:')
from benchmarks
)
select b.*, p.reported, p.comparability
from board b
left join attribution_published p  -- at most one row: a metric naming a dataset names the split
  on p.method = b.method and p.system = b.system and p.metric = split_part(b.metric, ' · ', 1)
 and (b.metric not like '% · %' or lower(p.split) = lower(split_part(b.metric, ' · ', 2)))
order by b.system, b.metric, b.method
