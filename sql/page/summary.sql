-- summary: the headline numbers of the dashboard page.
-- Grain: one row.
-- Columns:
--   graphs        graphs in the warehouse
--   annotations   failure annotations
--   systems       distinct systems
--   datasets      distinct datasets
select
    count(*) as graphs,
    coalesce(sum(n_annotations), 0)::bigint as annotations,
    count(distinct system) as systems,
    count(distinct dataset) as datasets
from graphs
