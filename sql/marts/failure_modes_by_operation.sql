-- failure_modes_by_operation: which operations the failures are attributed to, per system.
-- Grain: one row per (system, op_name, op_category, error_type, responsible_agent); every failure
-- annotation counted once, at its decisive faulty operation (annotations.faulty_op_id).
-- Columns:
--   system             the system
--   graph_kind         'memory' | 'multi_agent'
--   op_name            the faulty operation's op_name (memory: e.g. memory_system.extract_facts;
--                      multi-agent: the step's action kind, e.g. agent_message, browse, delegate);
--                      NULL when the label names no operation (final_op_id "null", e.g. AnnotationError)
--   op_category        the faulty operation's category
--   operation_type     cross-system operation type (sql/seeds/operation_types.csv, kind 'operation':
--                      extraction, update, embedding, segmentation, retrieval, response, judge,
--                      input, planning, delegation, tool_use, communication, other)
--   error_type         the annotated label (NULL for multi-agent sources)
--   error_class        'memory' | 'non_memory' | 'unlabelled'
--   responsible_agent  multi-agent only: the annotated mistake agent, as written (not normalised)
--   agent_role         multi-agent only: its role from the seed (kind 'agent'): orchestrator,
--                      web_surfer, file_surfer, terminal, coder, user, team_leader, product_manager,
--                      architect, engineer, data_analyst, expert, tool_agent, agent
--   n                  failure annotations in this group
--   share              n / all failure annotations of the system
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
