-- operation_types: which cross-system operation types the failures of each system are attributed to.
-- Grain: one row per (system, operation_type), from the failure_modes_by_operation mart.
-- Columns:
--   system          the system
--   graph_kind      'memory' | 'multi_agent'
--   operation_type  cross-system operation type of the faulty operation (seed); '(none named)' when
--                   the label names no operation (e.g. AnnotationError)
--   n               failure annotations
--   system_total    all failure annotations of the system: the denominator of share
--   share           n / system_total
--   top_operations  the operations behind the count, most frequent first (op_name (n), at most 4)
with per_op as (
    select system, graph_kind, coalesce(operation_type, '(none named)') as operation_type,
           coalesce(op_name, '(none)') as op_name, sum(n) as n
    from failure_modes_by_operation
    group by all
)
select
    system,
    any_value(graph_kind) as graph_kind,
    operation_type,
    sum(n)::bigint as n,
    any_value(system_total)::bigint as system_total,
    sum(n) / any_value(system_total) as share,
    string_agg(op_name || ' (' || n || ')', ', ' order by n desc, op_name) filter (where op_rank <= 4) as top_operations
from (
    select *,
           sum(n) over (partition by system) as system_total,
           row_number() over (partition by system, operation_type order by n desc, op_name) as op_rank
    from per_op
)
group by system, operation_type
order by graph_kind, system, n desc, operation_type
