-- failure_predictions: what each failure-attribution method (and each baseline) predicted for the
-- failures of failure_rows (a temp table of dashboards/failure_view.py), with the method's reason,
-- scored by the exact rules of attribution_accuracy (an OpenTelemetry trace's: its span and category,
-- as TRAIL scores them), on each measure only where the annotation gives its truth; the failure view
-- lists them.
-- Grain: one row per (annotation, method) of the method's cases.
select
    c.graph_id,
    c.annotation_id,
    c.method,
    c.predicted,
    c.predicted_error_type,
    c.predicted_op_id,
    c.predicted_agent,
    c.predicted_step,
    p.reason,
    -- each *_right: true (right), false (wrong, or no prediction: counts as wrong), NULL where it is
    -- not scored: the annotation gives no truth for it (a TRAIL label names no agent or step), or the
    -- exact rules do not score it on this kind of graph (a trajectory's operation is its step).
    -- An OpenTelemetry trace's label names a span and a category: scored as TRAIL scores them (the
    -- span's id, the category as trail_category() normalizes it), beside the agent and step
    case
        when c.error_type is null then null
        when c.graph_id like 'otel:%'
            then coalesce(trail_category(c.predicted_error_type) = trail_category(c.error_type), false)
        when c.graph_kind = 'memory' then coalesce(c.predicted_error_type = c.error_type, false)
    end as error_type_right,
    case
        when nullif(trim(c.faulty_op_id), '') is null then null
        when c.graph_id like 'otel:%' then coalesce(lower(c.predicted_op_id) = lower(c.faulty_op_id), false)
        when c.graph_kind = 'memory' then coalesce(c.predicted_op_id = c.faulty_op_id, false)
    end as op_right,
    case when c.graph_kind = 'multi_agent' and agent_key(c.responsible_agent) is not null
         then coalesce(same_agent(c.predicted_agent, c.responsible_agent), false) end
        as agent_right,
    case when c.graph_kind = 'multi_agent' and c.decisive_step is not null
         then coalesce(c.predicted_step = c.decisive_step, false) end
        as step_right
from attribution_cases() as c
join failure_rows as f on f.graph_id = c.graph_id and f.annotation_id = c.annotation_id
left join attributions as p on p.method = c.method and p.graph_id = c.graph_id and p.annotation_id = c.annotation_id
order by c.graph_id, c.annotation_id, starts_with(c.method, 'baseline:'), c.method
