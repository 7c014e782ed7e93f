-- annotation_table: one row per failure annotation for the dashboard's annotation table.
-- Grain: one row per annotation (graph_id, annotation_id), from the failure_propagation mart and
-- the annotations table; rows in the round-robin order over systems that drill-down pictures are
-- drawn in (the table can be sorted by any column on the page).
-- Columns:
--   graph_id, annotation_id   the annotation
--   system, dataset           where it comes from
--   graph_kind                'memory' | 'multi_agent'
--   error_type                the label ('unlabelled' for multi-agent sources)
--   op_name, operation_type   the decisive faulty operation and its cross-system type
--   phase                     memory graphs: construction | search | answer | judge
--   responsible_agent         multi-agent: the annotated agent
--   decisive_step, n_steps    multi-agent: the annotated step (0-based) and the trajectory's length
--   hops_to_prediction        edges from the faulty operation's outputs to the prediction
--   query                     the failed query's text (untrusted trace text, like the next three)
--   golden                    the reference answers, joined by ' | '
--   prediction                the system's answer (NULL when the source records none)
--   reason                    the label's reason (multi-agent mistake_reason)
--   draw_order                0-based position in drawing order
with ranked as (
    select f.*, row_number() over (partition by f.system order by f.graph_id, f.annotation_id) as system_rank
    from failure_propagation f
)
select
    f.graph_id,
    f.annotation_id,
    f.system,
    f.dataset,
    f.graph_kind,
    coalesce(f.error_type, 'unlabelled') as error_type,
    f.op_name,
    f.operation_type,
    f.phase,
    f.responsible_agent,
    f.decisive_step,
    f.n_steps,
    f.hops_to_prediction,
    a.query,
    array_to_string(a.golden_answers, ' | ') as golden,
    a.prediction,
    a.reason,
    row_number() over (order by f.system_rank, f.system, f.graph_id, f.annotation_id) - 1 as draw_order
from ranked f
left join annotations a using (graph_id, annotation_id)
order by draw_order
