-- error_mix: how each system's failures split over error types (normalized stacked bars).
-- Grain: one row per (system, error_type), from the failure_modes_by_system mart.
-- Columns:
--   system         the system
--   graph_kind     'memory' | 'multi_agent'
--   error_type     the annotated label in its canonical spelling (the mart counts by error_label(), so
--                  AgentRx's `Intent not supported` and `Intent Not Supported` are one type); 'unlabelled'
--                  where the mart has NULL (sources that label an agent and a step, not an error type)
--   error_class    'memory' | 'non_memory' | 'unlabelled'
--   n              failure annotations of the system with this label
--   system_total   all failure annotations of the system: the denominator of share
--   share          n / system_total
--   memory_share   n / the system's memory-system errors; NULL outside error_class 'memory'
--   informative    false for 'unlabelled' rows: a chart of only those says nothing (hidden)
select
    system,
    graph_kind,
    coalesce(error_type, 'unlabelled') as error_type,
    error_class,
    n,
    sum(n) over (partition by system) as system_total,
    share,
    memory_share,
    error_class <> 'unlabelled' as informative
from failure_modes_by_system
order by graph_kind, system, n desc, error_type
