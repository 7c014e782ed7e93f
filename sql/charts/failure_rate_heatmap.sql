-- failure_rate_heatmap: the failure rate of every system on every dataset, with its interval.
-- Grain: one row per (system, dataset), from the failure_rates mart.
-- Columns:
--   system, dataset   the cell
--   graph_kind        'memory' | 'multi_agent'
--   n_graphs          graphs (conversations / runs)
--   queries_judged    judged queries (the denominator); NULL for multi-agent sources
--   queries_failed    failed judgements; multi-agent: failed runs (every published run failed)
--   failure_rate      queries_failed / queries_judged; NULL when there is no denominator
--   ci_low, ci_high   95% Wilson interval
--   n_annotations     attributed failures
--   denominator_note  why the rate is missing (NULL when computed)
--   label             the text in the cell: the rate in percent, or 'no denominator'
--   detail            failed/judged, or the count of failed runs
--   informative       false where there is no rate: a chart of only those says nothing (hidden)
select
    system,
    dataset,
    graph_kind,
    n_graphs,
    queries_judged,
    queries_failed,
    failure_rate,
    ci_low,
    ci_high,
    n_annotations,
    denominator_note,
    case when failure_rate is null then 'no denominator' else format('{:.0f}%', 100 * failure_rate) end as label,
    case
        when queries_judged is null then format('{} failed run{}', queries_failed, if(queries_failed = 1, '', 's'))
        else format('{}/{}', queries_failed, queries_judged)
    end as detail,
    failure_rate is not null as informative
from failure_rates
order by graph_kind, system, dataset
