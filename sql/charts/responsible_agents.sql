-- responsible_agents: multi-agent sources: which agents the failures are attributed to, per system.
-- Grain: one row per (system, agent): the 8 most-blamed agents of each system, the rest folded into
-- one row '(N other agents)'. From the failure_modes_by_operation mart, on the failures whose label
-- names an agent (a TRAIL label names a span, no agent: such failures are not counted here).
-- Columns:
--   system         the system (captainagent, magentic-one, metagpt, ...)
--   agent          the annotated mistake agent, as the system's labels most often write it (spellings
--                  that differ only in case and surrounding spaces are one agent, agent_key());
--                  or '(N other agents)'
--   agent_role     its role (seed); 'other' for the folded row
--   n              failure annotations naming the agent
--   system_total   the system's failure annotations that name an agent: the denominator of share
--   share          n / system_total
--   agent_rank     1 = most blamed; the folded row ranks last
with per_spelling as (
    select system, agent_key(responsible_agent) as agent_key, responsible_agent, any_value(agent_role) as agent_role,
           sum(n) as n
    from failure_modes_by_operation
    where graph_kind = 'multi_agent' and agent_key(responsible_agent) is not null
    group by all
),
per_agent as (
    select system, agent_key,
           first(responsible_agent order by n desc, responsible_agent) as agent,
           first(agent_role order by n desc, responsible_agent) as agent_role,
           sum(n) as n
    from per_spelling
    group by system, agent_key
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
