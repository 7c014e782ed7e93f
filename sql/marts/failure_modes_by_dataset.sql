-- failure_modes_by_dataset: how the failures of each system on each dataset split over error types.
-- Grain: one row per (system, dataset, error_type); every failure annotation counted once.
-- Columns:
--   system        the system (MemTraceBench split, or captainagent / magentic-one / metagpt)
--   dataset       the source dataset (locomo, longmemeval, realmem; gaia, assistantbench; code, ...)
--   graph_kind    'memory' | 'multi_agent'
--   error_type    the annotated label; NULL for multi-agent sources (no error type published)
--   error_class   'memory' | 'non_memory' (AnnotationError, LLMAsAJudgeError) | 'unlabelled' (NULL)
--   n             failure annotations of this system and dataset with this label
--   share         n / all failure annotations of this system and dataset
--   memory_share  n / this system and dataset's memory-system errors only; NULL on the other rows
select
    system,
    dataset,
    any_value(graph_kind) as graph_kind,
    error_type,
    error_class,
    count(*) as n,
    count(*) / sum(count(*)) over (partition by system, dataset) as share,
    case
        when error_class = 'memory'
            then count(*) / sum(count(*)) filter (where error_class = 'memory') over (partition by system, dataset)
    end as memory_share
from failures()
group by system, dataset, error_type, error_class
order by system, dataset, n desc, error_type nulls last
