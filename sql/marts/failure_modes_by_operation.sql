-- failure_modes_by_operation: which operations the failures are attributed to, per system.
-- Its grain, columns and tests are declared in _marts.yml.
-- Each failure annotation is counted once, at its decisive faulty operation (annotations.faulty_op_id).
-- A label is counted by its canonical spelling (error_label()), an agent by agent_key() (the spellings
-- of one agent count once), shown as the system's annotations most often write it.
with
    f as (select *, agent_key(responsible_agent) as agent from failures()),
    spellings as (  -- each agent's spelling in the system's annotations: the most frequent one, then the first
        select system, agent, first(responsible_agent order by n desc, responsible_agent) as responsible_agent
        from (select system, agent, responsible_agent, count(*) as n from f where agent is not null group by all)
        group by system, agent
    )
select
    f.system,
    any_value(f.graph_kind) as graph_kind,
    f.op_name,
    f.op_category,
    any_value(f.operation_type) as operation_type,
    f.error_label as error_type,
    f.error_class,
    any_value(s.responsible_agent) as responsible_agent,
    any_value(f.agent_role) as agent_role,
    count(*) as n,
    count(*) / sum(count(*)) over (partition by f.system) as share
from f
left join spellings s using (system, agent)
group by f.system, f.op_name, f.op_category, f.error_label, f.error_class, f.agent
order by f.system, n desc, f.op_name nulls last, error_type nulls last, responsible_agent nulls last
