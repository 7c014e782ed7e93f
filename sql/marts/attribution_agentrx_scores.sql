-- attribution_agentrx_scores: each failure-attribution method scored on AgentRx-labelled trajectories
-- (annotations of taxonomy 'agentrx') by AgentRx's own rules (agentrx/judge/judge.py of
-- microsoft/AgentRx: compute_stats and analysis), per system and dataset. Its grain, columns and tests
-- are declared in _marts.yml; docs/ATTRIBUTION.md.
--
-- AgentRx judges a trajectory by one failure, its root cause (the annotation with is_root_cause), and
-- a judge names one failure per trajectory: a category and a step. Its scores:
--   step accuracy     the predicted step equals the root cause's (tracehouse's steps are AgentRx's
--                     step_number - 1 on both sides, so the difference is AgentRx's);
--   within ±k         |predicted step - root-cause step| <= k, k = 1..5 (its tolerance accuracies);
--   category accuracy the predicted category is the root cause's failure case, both read by
--                     agentrx_failure_case() (its convert_to_failure_case key-word rules);
--   agent accuracy    not an AgentRx score (its judge names no agent): the predicted agent is the root
--                     cause's failed_agent by same_agent() (case and surrounding white space ignored: its files
--                     write Websurfer and WebSurfer), by the same per-trajectory rule.
-- A trajectory is scored on a field only where its root cause gives that field's truth (a step, a
-- category, an agent) and the prediction names it: a score without either is NULL, left out.
-- Every accuracy is over the trajectories the method predicted with that field (AgentRx's analysis
-- divides by the trajectories it judged; a prediction without a step is not a wrong step but no
-- step: NULL, left out), with a 95% Wilson interval; n_trajectories counts every root cause in the
-- method's scope, so coverage = n_predicted / n_trajectories.
-- A method's prediction for a trajectory: its prediction on the root-cause annotation, else (when it
-- predicted on other failures of the trajectory only) its earliest predicted step, as AgentRx's root
-- cause is the first failure not recovered from.
with
    agentrx as (select annotation_id, is_root_cause from annotations where taxonomy = 'agentrx'),
    cases as materialized (
        select c.*, coalesce(a.is_root_cause, false) as is_root_cause
        from attribution_cases() c
        join agentrx a using (annotation_id)
    ),
    roots as (
        select method, system, dataset, graph_id, error_type, responsible_agent, decisive_step
        from cases
        where is_root_cause
        qualify row_number() over (partition by method, graph_id order by annotation_id) = 1
    ),
    guesses as (  -- the method's one prediction per trajectory
        select method, graph_id, predicted_error_type, predicted_agent, predicted_step
        from cases
        where predicted
        qualify row_number() over (partition by method, graph_id
                                   order by is_root_cause desc, predicted_step nulls last, annotation_id) = 1
    ),
    scored as (
        select
            r.method, r.system, r.dataset,
            g.graph_id is not null as predicted,
            g.predicted_step - r.decisive_step as step_error,
            case when g.predicted_error_type is not null
                 then agentrx_failure_case(g.predicted_error_type) = agentrx_failure_case(r.error_type) end
                as category_hit,
            case when g.predicted_agent is not null
                 then same_agent(g.predicted_agent, r.responsible_agent) end
                as agent_hit
        from roots r
        left join guesses g using (method, graph_id)
    ),
    counted as (
        select
            method, system, dataset,
            count(*) as n_trajectories,
            count(*) filter (where predicted) as n_predicted,
            count(step_error) as n_step,
            count(*) filter (where step_error = 0) as step_correct,
            count(*) filter (where abs(step_error) <= 1) as step_within_1,
            count(*) filter (where abs(step_error) <= 2) as step_within_2,
            count(*) filter (where abs(step_error) <= 3) as step_within_3,
            count(*) filter (where abs(step_error) <= 4) as step_within_4,
            count(*) filter (where abs(step_error) <= 5) as step_within_5,
            avg(abs(step_error)) as step_mae,
            count(category_hit) as n_category,
            count(*) filter (where category_hit) as category_correct,
            count(agent_hit) as n_agent,
            count(*) filter (where agent_hit) as agent_correct
        from scored
        group by method, system, dataset
    )
select
    method, system, dataset, n_trajectories, n_predicted,
    n_step,
    step_correct,
    step_correct / nullif(n_step, 0) as step_accuracy,
    wilson_low(step_correct, n_step) as step_ci_low,
    wilson_high(step_correct, n_step) as step_ci_high,
    step_within_1 / nullif(n_step, 0) as step_accuracy_within_1,
    step_within_2 / nullif(n_step, 0) as step_accuracy_within_2,
    step_within_3 / nullif(n_step, 0) as step_accuracy_within_3,
    step_within_4 / nullif(n_step, 0) as step_accuracy_within_4,
    step_within_5 / nullif(n_step, 0) as step_accuracy_within_5,
    step_mae,
    n_category,
    category_correct,
    category_correct / nullif(n_category, 0) as category_accuracy,
    wilson_low(category_correct, n_category) as category_ci_low,
    wilson_high(category_correct, n_category) as category_ci_high,
    n_agent,
    agent_correct,
    agent_correct / nullif(n_agent, 0) as agent_accuracy,
    wilson_low(agent_correct, n_agent) as agent_ci_low,
    wilson_high(agent_correct, n_agent) as agent_ci_high,
    starts_with(method, 'baseline:') as is_baseline
from counted
order by method, system, dataset
