-- decisive_position: multi-agent sources: where in the trajectory the decisive mistake lies.
-- Grain: one row per (system, position bin, spoke): tenths of the trajectory (0 = first step,
-- 1 = last), from the failure_propagation mart. One-step trajectories (no position) are left out.
-- Columns:
--   system          the system
--   bin_start       start of the tenth, 0.0 .. 0.9 (a mistake in the last step falls in 0.9)
--   bin_end         bin_start + 0.1
--   spoke           whether the annotated agent acted in the annotated step: 'agent acted in the
--                   step', 'another agent acted', 'unknown'
--   n               failure annotations
--   system_total    multi-agent failure annotations of the system with a position
--   mean_steps      mean trajectory length of these annotations
select
    system,
    least(floor(decisive_position * 10), 9) / 10 as bin_start,
    least(floor(decisive_position * 10), 9) / 10 + 0.1 as bin_end,
    case
        when agent_spoke_step then 'agent acted in the step'
        when not agent_spoke_step then 'another agent acted'
        else 'unknown'
    end as spoke,
    count(*) as n,
    any_value(t.system_total) as system_total,
    avg(n_steps) as mean_steps
from failure_propagation
join (
    select system, count(*) as system_total
    from failure_propagation
    where graph_kind = 'multi_agent' and decisive_position is not null
    group by system
) t using (system)
where graph_kind = 'multi_agent' and decisive_position is not null
group by all
order by system, bin_start, spoke
