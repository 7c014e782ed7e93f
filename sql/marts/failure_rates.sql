-- failure_rates: how often each system fails on each dataset, with a 95% Wilson interval.
-- Its grain, columns and tests are declared in _marts.yml.
-- Scores are read from nodes.value_short (the value when short, as a score is), never from the long
-- value column. Memory graphs carry a judge subgraph for every judged query, passed or failed: a judgement is one
-- (judge operation, judge_score output node) pair, i.e. an edge into a node of class_name
-- 'judge_score' (counted per pair, not per node, so two queries whose scores smartcomment stored as
-- one node by content still count twice). Failed = the score's value is 0 ("0.0", also when stored
-- quoted as '0.0'), passed = 1. Multi-agent sources
-- (Who&When, TracerTraj) publish failed runs only: there is no denominator, so judged,
-- rate and interval are NULL and denominator_note says why.
with
    kinds as (select * from graph_kinds()),
    judgements as (
        select distinct
            e.graph_id,
            e.op_id,
            e.target_full_node_id,
            try_cast(trim(unquoted(trim(n.value_short))) as double) as score
        from edges e
        join nodes n on n.graph_id = e.graph_id and n.full_node_id = e.target_full_node_id
        where n.class_name = 'judge_score'
    ),
    per_graph as (
        select
            k.graph_id,
            k.system,
            k.dataset,
            k.graph_kind,
            count(j.graph_id) as judged,
            count(*) filter (where j.score = 0) as failed,
            count(*) filter (where j.score = 1) as passed
        from kinds k
        left join judgements j using (graph_id)
        group by all
    ),
    annotated as (
        select k.system, k.dataset, k.graph_kind, count(*) as n_annotations
        from annotations a
        join kinds k using (graph_id)
        group by all
    ),
    rates as (
        select
            system,
            dataset,
            graph_kind,
            count(*) as n_graphs,
            case when graph_kind = 'memory' then sum(judged)::bigint end as queries_judged,
            case when graph_kind = 'memory' then sum(failed)::bigint else count(*) end as queries_failed,
            case when graph_kind = 'memory' then sum(passed)::bigint end as queries_passed
        from per_graph
        group by system, dataset, graph_kind
    )
select
    r.system,
    r.dataset,
    r.graph_kind,
    r.n_graphs,
    r.queries_judged,
    r.queries_failed,
    r.queries_passed,
    case when r.queries_judged > 0 then r.queries_failed / r.queries_judged end as failure_rate,
    wilson_low(r.queries_failed, r.queries_judged) as ci_low,
    wilson_high(r.queries_failed, r.queries_judged) as ci_high,
    coalesce(a.n_annotations, 0) as n_annotations,
    case
        when r.graph_kind = 'multi_agent'
            then 'source publishes failed runs only: no judged-query denominator, rate not computed'
        when r.queries_judged = 0
            then 'no judge_score nodes in these graphs: no judged-query denominator, rate not computed'
    end as denominator_note
from rates r
left join annotated a using (system, dataset, graph_kind)
order by r.system, r.dataset
