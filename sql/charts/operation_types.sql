-- operation_types: which cross-system operation types the failures of each system are attributed to,
-- on the one taxonomy memory and multi-agent systems share (the seed operation_types).
-- Grain: one row per (system, operation_type) for every system with failure annotations and every
-- operation type of the seed (n = 0 where none), plus '(none named)' where a label names no operation;
-- from the failure_modes_by_operation mart.
-- Columns:
--   system          the system
--   graph_kind      'memory' | 'multi_agent'
--   operation_type  cross-system operation type of the faulty operation (seed); '(none named)' when
--                   the label names no operation (e.g. AnnotationError)
--   n               failure annotations
--   system_total    all failure annotations of the system: the denominator of share
--   share           n / system_total
--   top_operations  the operations behind the count, most frequent first (op_name (n), at most 4)
--   informative     n > 0 for a named operation type (a chart of only zeros and '(none named)' is hidden)
with per_op as (
    select system, graph_kind, coalesce(operation_type, '(none named)') as operation_type,
           coalesce(op_name, '(none)') as op_name, sum(n) as n
    from failure_modes_by_operation
    group by all
),
counted as (
    select
        system,
        operation_type,
        sum(n)::bigint as n,
        string_agg(op_name || ' (' || n || ')', ', ' order by n desc, op_name) filter (where op_rank <= 4)
            as top_operations
    from (
        select *, row_number() over (partition by system, operation_type order by n desc, op_name) as op_rank
        from per_op
    )
    group by system, operation_type
),
systems as (
    select system, any_value(graph_kind) as graph_kind, sum(n)::bigint as system_total
    from per_op group by system
),
types as (
    select distinct operation_type from operation_types where kind = 'operation'
    union
    select operation_type from counted
)
select
    s.system,
    s.graph_kind,
    t.operation_type,
    coalesce(c.n, 0)::bigint as n,
    s.system_total,
    coalesce(c.n, 0) / s.system_total as share,
    c.top_operations,
    coalesce(c.n, 0) > 0 and t.operation_type <> '(none named)' as informative
from systems s
cross join types t
left join counted c on c.system = s.system and c.operation_type = t.operation_type
where t.operation_type <> '(none named)' or c.n is not null
order by s.graph_kind, s.system, n desc, t.operation_type
