-- failure_modes_by_dataset: how the failures of each system on each dataset split over error types.
-- Its grain, columns and tests are declared in _marts.yml.
-- A label is counted by its canonical spelling (error_label()), so the spellings of one category
-- count once.
select
    system,
    dataset,
    any_value(graph_kind) as graph_kind,
    error_label as error_type,
    error_class,
    count(*) as n,
    count(*) / sum(count(*)) over (partition by system, dataset) as share,
    case
        when error_class = 'memory'
            then count(*) / sum(count(*)) filter (where error_class = 'memory') over (partition by system, dataset)
    end as memory_share
from failures()
group by system, dataset, error_label, error_class
order by system, dataset, n desc, error_type nulls last
