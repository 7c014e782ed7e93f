-- responsible_agents: multi-agent sources: which agents the failures are attributed to, per system.
-- Grain: one row per (system, agent): the 8 most-blamed agents of each system by name, the rest
-- folded into one row '(N other agents)'. From the failure_modes_by_operation mart.
-- Columns:
--   system         the system (captainagent, magentic-one, metagpt, ...)
--   agent          the annotated mistake agent, as written in the trace; or '(N other agents)'
--   agent_role     its role (seed); 'other' for the folded row
--   n              failure annotations naming the agent
--   system_total   all failure annotations of the system: the denominator of share
--   share          n / system_total
--   agent_rank     1 = most blamed; the folded row ranks last
with per_agent as (
    select system, coalesce(responsible_agent, '(none)') as agent, any_value(agent_role) as agent_role,
           sum(n) as n
    from failure_modes_by_operation
    where graph_kind = 'multi_agent'
    group by all
),
ranked as (
    select *, row_number() over (partition by system order by n desc, agent) as agent_rank,
           sum(n) over (partition by system) as system_total
    from per_agent
)
select system, agent, coalesce(agent_role, 'agent') as agent_role, n::bigint as n,
       system_total::bigint as system_total, n / system_total as share, agent_rank
from ranked where agent_rank <= 8
union all
select system, format('({} other agents)', count(*)), 'other', sum(n)::bigint, any_value(system_total)::bigint,
       sum(n) / any_value(system_total), 9
from ranked where agent_rank > 8
group by system
order by system, agent_rank
