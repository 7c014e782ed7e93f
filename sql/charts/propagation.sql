-- propagation: how far memory-system failures travel: edges from the faulty operation to the
-- prediction, and sessions between the fault and the query, per system and phase.
-- Grain: one row per (system, measure, panel, bucket, phase), memory graphs only (multi-agent traces
-- have no prediction node and a single session), from the failure_propagation mart; plus one empty
-- row (n = 0) per (system, measure, panel) a system has nothing in, so every panel has a row per system.
-- Columns:
--   system         the system
--   phase          construction | search | answer | judge | 'unknown' (mart NULL)
--   measure        'edges to the prediction' | 'sessions between fault and query'
--   panel          'distance' (distance is a number on the axis) | 'no distance' (bucket says why the
--                  failure is not on the axis)
--   distance       the distance (edges or sessions), a number; NULL in the 'no distance' panel
--   bucket         the distance as text, or why it is not on the axis: 'more than K' (beyond the axis's
--                  cut, see axis_max), 'not reached' (the prediction is not reachable from the
--                  operation's outputs), 'no prediction node', 'no faulty op' (the label names no
--                  operation), 'unknown' (the sessions could not be placed)
--   bucket_order   sort key of bucket (distances first, then the reasons)
--   n              failure annotations
--   y0, y1         where the bar of this phase starts and ends in its stack (phases in a fixed order)
--   system_total   memory failure annotations of the system
--   axis_max       where the measure's numeric axis ends: the largest distance when it is at most 10,
--                  else the 95th percentile (at least 5): a few far failures (one at 200 edges) do not
--                  squeeze the rest, which almost all lie within 5, into one bar; they are counted
--                  in the 'more than K' bucket beside the axis
with p as (
    select * from failure_propagation where graph_kind = 'memory'
),
long as (
    select
        system,
        coalesce(phase, 'unknown') as phase,
        'edges to the prediction' as measure,
        case when faulty_op_id is not null and prediction_node_id is not null then hops_to_prediction end
            as distance,
        case
            when faulty_op_id is null then 'no faulty op'
            when prediction_node_id is null then 'no prediction node'
            when hops_to_prediction is null then 'not reached'
        end as reason,
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
        case when faulty_op_id is not null and session_distance is not null then sessions_between end,
        case when faulty_op_id is null then 'no faulty op' when session_distance is null then 'unknown' end,
        case when faulty_op_id is null then 1002 when session_distance is null then 1001 else sessions_between end
    from p
),
axis as (
    select
        measure,
        case when max(distance) <= 10 then coalesce(max(distance), 0)
             else greatest(5, ceil(quantile_cont(distance, 0.95)))::bigint end as axis_max
    from long
    group by measure
),
cut as (
    select
        l.system, l.phase, l.measure,
        case when l.distance > a.axis_max then null else l.distance end as distance,
        case when l.distance > a.axis_max then 'more than ' || a.axis_max else l.reason end as reason,
        case when l.distance > a.axis_max then 999 else l.bucket_order end as bucket_order
    from long l
    join axis a using (measure)
),
counted as (
    select
        system, phase, measure,
        case when reason is null then 'distance' else 'no distance' end as panel,
        distance,
        coalesce(reason, distance::varchar) as bucket,
        bucket_order,
        count(*) as n
    from cut
    group by all
),
stacked as (
    select
        *,
        coalesce(sum(n) over (
            partition by system, measure, panel, bucket
            order by case phase when 'construction' then 1 when 'search' then 2 when 'answer' then 3
                                when 'judge' then 4 else 5 end, phase
            rows between unbounded preceding and 1 preceding), 0) as y0
    from counted
),
-- an empty row for a panel a system has nothing in (its row of the faceted panel stays in place)
panels as (
    select distinct measure, panel, first(bucket order by bucket_order) over (partition by measure, panel) as bucket,
           first(bucket_order order by bucket_order) over (partition by measure, panel) as bucket_order,
           first(distance order by bucket_order) over (partition by measure, panel) as distance
    from counted
),
empty as (
    select s.system, (select min(phase) from counted) as phase, pn.measure, pn.panel, pn.distance, pn.bucket, pn.bucket_order,
           0 as n, 0 as y0
    from (select distinct system from p) s
    cross join panels pn
    where not exists (
        select 1 from counted c where c.system = s.system and c.measure = pn.measure and c.panel = pn.panel
    )
)
select
    system, phase, measure, panel, distance, bucket, bucket_order,
    n::bigint as n, y0::bigint as y0, (y0 + n)::bigint as y1,
    t.system_total,
    a.axis_max
from (select * from stacked union all select * from empty)
join (select system, count(*) as system_total from p group by system) t using (system)
join axis a using (measure)
order by system, measure, panel, bucket_order, phase
