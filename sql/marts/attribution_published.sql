-- attribution_published: each scored leaderboard row beside the number its benchmark's paper reports
-- for the same benchmark, split and metric (seed published_results). Its grain, columns and tests are
-- declared in _marts.yml.
-- A row's benchmark and split are its cases' (annotations.provenance: 'whowhen/Hand-Crafted', 'trail/GAIA';
-- TRAIL's scores are per graph dataset: a TRAIL row's split is the one its labels' provenance names, else
-- that dataset). A published method matches a method whose name is the same ignoring case
-- and anything but letters and digits (all_at_once ~ All-at-Once). Who&When's numbers are evaluate.py's,
-- whose comparison is the legacy rule: accuracy_as_reported is that rule's (TRAIL: its own location, category F1
-- and joint scores). A row whose cases mix benchmarks or splits is kept, said not comparable, when any of its
-- benchmarks has reported numbers; its benchmark names them all ('agentrx, whowhen').
-- AgentRx's numbers are compared with its own scores (attribution_agentrx_scores: root-cause step, failure
-- case, agent; the paper's step-index, critical category and agent accuracy are those definitions), per
-- domain: the one its graph ids name ('agentrx:tau_retail/...' is its τ-bench), summed over the datasets of
-- the domain (its Magentic holds GAIA and AssistantBench tasks). The exact-rule rows of AgentRx cases score
-- every labelled failure, not the root cause alone: the paper reports none of those.
with
    published as (
        select *, regexp_replace(lower(method), '[^a-z0-9]', '', 'g') as method_key
        from published_results
    ),
    cases as (
        select
            c.method, c.system,
            split_part(a.provenance, '/', 1) as benchmark,
            split_part(a.provenance, '/', 2) as split,
            c.responsible_agent, c.decisive_step, c.predicted_agent, c.predicted_step
        from attribution_cases() c
        join annotations a using (graph_id, annotation_id)
        where c.graph_kind = 'multi_agent'
    ),
    trail_splits as (  -- each TRAIL score's split: its labels' ('trail/GAIA'), else the graphs' dataset
        select c.method, c.system, c.dataset,
               count(distinct coalesce(nullif(split_part(a.provenance, '/', 2), ''), c.dataset)) as n_splits,
               min(coalesce(nullif(split_part(a.provenance, '/', 2), ''), c.dataset)) as split
        from attribution_cases() c
        join annotations a using (graph_id, annotation_id)
        where a.taxonomy = 'trail'
        group by c.method, c.system, c.dataset
    ),
    agentrx_splits as (  -- each AgentRx score's split: the domain its graph ids name, else the graphs' dataset
        select c.method, c.system, c.dataset,
               count(distinct coalesce(nullif(regexp_extract(c.graph_id, '^agentrx:([^/]+)/', 1), ''), c.dataset))
                   as n_splits,
               min(coalesce(nullif(regexp_extract(c.graph_id, '^agentrx:([^/]+)/', 1), ''), c.dataset)) as split
        from attribution_cases() c
        join annotations a using (graph_id, annotation_id)
        where a.taxonomy = 'agentrx'
        group by c.method, c.system, c.dataset
    ),
    agentrx_scored as (  -- AgentRx's counts summed over the datasets of a domain
        select t.method, t.system, l.split, max(l.n_splits) as n_splits,
               sum(t.n_step)::bigint as n_step, sum(t.step_correct)::bigint as step_correct,
               sum(t.n_category)::bigint as n_category, sum(t.category_correct)::bigint as category_correct,
               sum(t.n_agent)::bigint as n_agent, sum(t.agent_correct)::bigint as agent_correct
        from attribution_agentrx_scores t
        join agentrx_splits l using (method, system, dataset)
        group by t.method, t.system, l.split
    ),
    measured as (
        select method, system, 'responsible agent' as metric, benchmark, split,
               coalesce(same_agent(predicted_agent, responsible_agent), false) as hit,
               coalesce(contains(predicted_agent, responsible_agent), false) as hit_as_reported
        from cases where agent_key(responsible_agent) is not null
        union all
        select method, system, 'decisive step', benchmark, split,
               coalesce(predicted_step = decisive_step, false),
               coalesce(contains(predicted_step::varchar, decisive_step::varchar), false)
        from cases where decisive_step is not null
    ),
    scored as (
        select
            method, system, metric,
            count(distinct benchmark || '/' || split) as n_splits,
            string_agg(distinct benchmark, ', ' order by benchmark) as benchmark,
            list(distinct benchmark) as benchmarks,
            case when count(distinct benchmark || '/' || split) = 1 then min(split) end as split,
            count(*) as n_cases,
            count(*) filter (where hit) / count(*) as accuracy,
            count(*) filter (where hit_as_reported) / count(*) as accuracy_as_reported
        from measured
        group by method, system, metric
        union all
        select t.method, t.system, v.trail_metric, coalesce(l.n_splits, 1), 'trail', ['trail'],
               case when coalesce(l.n_splits, 1) = 1 then coalesce(l.split, t.dataset) end,
               v.n_scored, v.score, v.score
        from attribution_trail_scores t
        left join trail_splits l using (method, system, dataset),
        lateral (values ('TRAIL location', n_traces_location, location_accuracy),
                        ('TRAIL category F1', n_traces_category, category_f1),
                        ('TRAIL joint', n_traces_joint, joint_accuracy)) as v(trail_metric, n_scored, score)
        where v.n_scored > 0 and v.score is not null
        union all
        select x.method, x.system, v.agentrx_metric, x.n_splits, 'agentrx', ['agentrx'],
               case when x.n_splits = 1 then x.split end,
               v.n_scored, v.n_correct / v.n_scored, v.n_correct / v.n_scored
        from agentrx_scored x,
        lateral (values ('AgentRx root-cause step', n_step, step_correct),
                        ('AgentRx failure case', n_category, category_correct),
                        ('AgentRx agent', n_agent, agent_correct)) as v(agentrx_metric, n_scored, n_correct)
        where v.n_scored > 0
    ),
    matched as (
        select
            s.method, s.system, s.metric, s.split,
            count(p.value) as n_reported,
            any_value(p.split_records) as split_records,
            string_agg(p.method || ', ' || p.model || ': ' || printf('%.2f', p.value) || '%'
                       || coalesce(' ' || nullif(p.setting, ''), '') || ' (' || p.metric || ', '
                       || coalesce(nullif(p.paper_table, ''), 'table not named') || ', arXiv:' || p.arxiv_id || ')',
                       '; ' order by p.setting, p.model) as reported
        from scored s
        join published p
          on p.benchmark = s.benchmark and lower(p.split) = lower(s.split) and p.leaderboard_metric = s.metric
         and p.method_key = regexp_replace(lower(s.method), '[^a-z0-9]', '', 'g')
        group by all
    ),
    offered as (  -- what the papers report for the row's benchmark, split and metric, whichever method
        select
            s.method, s.system, s.metric, s.split,
            bool_or(lower(p.split) = lower(s.split) and p.leaderboard_metric = s.metric) as split_reported,
            string_agg(distinct case when lower(p.split) = lower(s.split) and p.leaderboard_metric = s.metric
                                     then p.method end, ', ' order by case when lower(p.split) = lower(s.split)
                                     and p.leaderboard_metric = s.metric then p.method end) as reported_methods
        from scored s
        join published p on list_contains(s.benchmarks, p.benchmark)
        group by all
    )
select
    s.method,
    s.system,
    s.metric,
    s.split,
    s.benchmark,
    s.n_cases,
    s.accuracy,
    s.accuracy_as_reported,
    m.split_records,
    coalesce(m.n_reported, 0) as n_reported,
    m.reported,
    case
        when s.n_splits > 1 then 'not comparable: the cases mix benchmarks or splits'
        when not o.split_reported then 'not comparable: the papers report no ' || s.metric || ' for ' || s.benchmark
                                       || ' ' || s.split
        when m.reported is null then 'not comparable: no reported method is named ' || s.method || ' (reported: '
                                     || o.reported_methods || ')'
        when m.split_records is null then 'not comparable: how many records the paper scored is not known here'
        when s.n_cases <> m.split_records then 'not comparable: a subset, ' || s.n_cases || ' of the split''s '
                                               || m.split_records || ' records'
        else 'comparable: the whole split; by the paper''s rule ' || printf('%.2f', 100 * s.accuracy_as_reported) || '%'
    end as comparability,
    coalesce(s.n_splits = 1 and m.reported is not null and s.n_cases = m.split_records, false) as comparable
from scored s
join offered o on o.method = s.method and o.system = s.system and o.metric = s.metric
              and o.split is not distinct from s.split
left join matched m on m.method = s.method and m.system = s.system and m.metric = s.metric
                   and m.split is not distinct from s.split
order by s.system, s.metric, s.method
