-- failure_modes_by_system: how the failures of each system split over error types.
-- Grain: one row per (system, error_type); every failure annotation counted once.
-- Columns:
--   system        the system (MemTraceBench split, or captainagent / magentic-one / metagpt)
--   graph_kind    'memory' (smartcomment execution graphs) | 'multi_agent' (Who&When, TracerTraj)
--   error_type    the annotated label; NULL for multi-agent sources, which attribute a failure to
--                 an agent and a step but give no error type (see error_class = 'unlabelled')
--   error_class   'memory' | 'non_memory' (AnnotationError, LLMAsAJudgeError) | 'unlabelled' (NULL)
--   n             failure annotations of this system with this label
--   share         n / all failure annotations of the system
--   memory_share  n / the system's memory-system errors only (AnnotationError, LLMAsAJudgeError
--                 and unlabelled left out); NULL on the rows that are left out
select
    system,
    any_value(graph_kind) as graph_kind,
    error_type,
    error_class,
    count(*) as n,
    count(*) / sum(count(*)) over (partition by system) as share,
    case
        when error_class = 'memory'
            then count(*) / sum(count(*)) filter (where error_class = 'memory') over (partition by system)
    end as memory_share
from failures()
group by system, error_type, error_class
order by system, n desc, error_type nulls last
