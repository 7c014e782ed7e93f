-- input_files_unaccounted: input files that are not accounted for: a file of a build's manifests that
-- ends neither in graphs nor (rejected) in ingest_errors, a file whose rows in graphs or ingest_errors
-- differ from its manifest entry, or rows of graphs / ingest_errors whose file no manifest lists.
-- asset: ingest_errors
-- severity: error
-- A labels file whose annotations are loaded with another file's graphs (AgentRx's ground truth) is
-- accounted for by the labels its manifest entry counts (input_files.n_labels).
-- Together: files in graphs + labels files + files rejected in ingest_errors = the files the ingest found.
-- Grain: one row per (source, file) with a problem (a file's path is unique within its source).
with loaded as (
    -- a graph read from several files (an otlp trace: graphs.files) counts for each of them
    select source, f.file, count(*) as graph_rows, 0 as prediction_rows
    from graphs, unnest(coalesce(files, [file])) as f(file)
    group by all
    union all
    select method as source, source_file as file, 0, count(*)
    from attributions
    group by all
),
recorded as (
    select source, file, count(*) as error_rows, count(*) filter (where rejected) as rejected_rows
    from ingest_errors
    group by all
),
accounted as (
    select
        source,
        file,
        m.file is not null as in_manifest,
        m.n_graphs as manifest_graphs,
        m.n_predictions as manifest_predictions,
        m.n_errors as manifest_errors,
        coalesce(m.n_labels, 0) as manifest_labels,
        coalesce(l.graph_rows, 0) as graph_rows,
        coalesce(l.prediction_rows, 0) as prediction_rows,
        coalesce(r.error_rows, 0) as error_rows,
        coalesce(r.rejected_rows, 0) as rejected_rows
    from input_files as m
    full join loaded as l using (source, file)
    full join recorded as r using (source, file)
)
select
    source,
    file,
    case
        when not in_manifest then 'rows of a file that no manifest lists'
        when graph_rows = 0 and prediction_rows = 0 and rejected_rows = 0 and manifest_labels = 0
            then 'in neither graphs, attributions nor ingest_errors'
        when graph_rows <> manifest_graphs then 'graphs rows differ from the manifest'
        when prediction_rows <> manifest_predictions then 'attributions rows differ from the manifest'
        when error_rows <> manifest_errors then 'ingest_errors rows differ from the manifest'
    end as problem,
    manifest_graphs,
    graph_rows,
    manifest_errors,
    error_rows
from accounted
where problem is not null
