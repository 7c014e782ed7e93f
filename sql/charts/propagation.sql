-- propagation: how far memory-system failures travel: edges from the faulty operation to the
-- prediction, and sessions between the fault and the query, per system and phase.
-- Grain: one row per (system, phase, measure, bucket), memory graphs only (multi-agent traces have
-- no prediction node and a single session), from the failure_propagation mart.
-- Columns:
--   system         the system
--   phase          construction | search | answer | judge | 'unknown' (mart NULL)
--   measure        'edges to the prediction' | 'sessions between fault and query'
--   bucket         the distance as text, or why there is none: 'not reached' (the prediction
--                  is not reachable from the operation's outputs), 'no prediction node', 'no faulty op'
--                  (the label names no operation), 'unknown' (the sessions could not be placed)
--   bucket_order   sort key of bucket (distances first, then the reasons)
--   n              failure annotations
--   system_total   memory failure annotations of the system
with p as (
    select * from failure_propagation where graph_kind = 'memory'
),
long as (
    select
        system,
        coalesce(phase, 'unknown') as phase,
        'edges to the prediction' as measure,
        case
            when faulty_op_id is null then 'no faulty op'
            when prediction_node_id is null then 'no prediction node'
            when hops_to_prediction is null then 'not reached'
            else hops_to_prediction::varchar
        end as bucket,
        case
            when faulty_op_id is null then 1002
            when prediction_node_id is null then 1001
            when hops_to_prediction is null then 1000
            else hops_to_prediction
        end as bucket_order
    from p
    union all
    select
        system,
        coalesce(phase, 'unknown'),
        'sessions between fault and query',
        -- session_distance, not sessions_between: the mart's greatest(NULL - 1, 0) gives 0 without a faulty op
        case
            when faulty_op_id is null then 'no faulty op'
            when session_distance is null then 'unknown'
            else sessions_between::varchar
        end,
        case when faulty_op_id is null then 1002 when session_distance is null then 1001 else sessions_between end
    from p
)
select
    system, phase, measure, bucket, bucket_order,
    count(*) as n,
    any_value(t.system_total) as system_total
from long
join (select system, count(*) as system_total from p group by system) t using (system)
group by system, phase, measure, bucket, bucket_order
order by system, measure, bucket_order, phase
