-- failure_modes_by_operation: which operations the failures are attributed to, per system.
-- Its grain, columns and tests are declared in _marts.yml.
-- Each failure annotation is counted once, at its decisive faulty operation (annotations.faulty_op_id).
select
    system,
    any_value(graph_kind) as graph_kind,
    op_name,
    op_category,
    any_value(operation_type) as operation_type,
    error_type,
    error_class,
    responsible_agent,
    any_value(agent_role) as agent_role,
    count(*) as n,
    count(*) / sum(count(*)) over (partition by system) as share
from failures()
group by system, op_name, op_category, error_type, error_class, responsible_agent
order by system, n desc, op_name nulls last, error_type nulls last, responsible_agent nulls last
