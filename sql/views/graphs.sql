-- graphs: described in _views.yml; its columns are pipelines/schema.py's (docs/TABLES.md).
-- n_annotations counts a graph's annotations across sources: the ones its own partition holds (as its
-- Parquet file says) plus those another partition holds for it (a label source's, e.g. trail_labels on
-- an OpenTelemetry trace), so graph_row_counts_mismatch holds across sources.
create or replace view graphs as
with own as (
    select *, parse_dirpath(filename) as partition_dir
    from read_parquet({{ files }}, filename = true)
),
elsewhere as (
    select a.graph_id, count(*) as n
    from read_parquet({{ annotation_files }}, filename = true) as a
    join own as g on g.graph_id = a.graph_id and g.partition_dir <> parse_dirpath(a.filename)
    group by a.graph_id
)
select own.* exclude (filename, partition_dir) replace (own.n_annotations + coalesce(e.n, 0) as n_annotations)
from own
left join elsewhere as e using (graph_id);
