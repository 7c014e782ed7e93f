-- input_files: one row per input file a partition of the build was built from, read from the manifest.json
-- of each partition's generation. Grain: (partition, file); source = the source the file was read from.
-- n_graphs = graphs loaded from the file, n_predictions = predictions loaded from a prediction file,
-- n_labels = the labelled trajectories a labels file names (AgentRx's ground truth: their annotations are
-- loaded with the graphs of the trajectory files), n_errors = its ingest_errors rows (n_rejected of them rejected);
-- outcome: 'loaded', 'partly loaded' (some records rejected), 'rejected', or 'unaccounted' (neither).
create or replace view input_files as
with manifests as (
    select partition, kind, source, unnest(files) as f
    from read_json(
        {{ files }},
        format = 'auto',
        maximum_object_size = 1073741824,
        columns = {
            partition: 'VARCHAR',
            kind: 'VARCHAR',
            source: 'VARCHAR',
            files: 'STRUCT(file VARCHAR, size BIGINT, mtime_ns BIGINT, sha256 VARCHAR, graph_ids VARCHAR[],
                "rows" STRUCT(graphs BIGINT, sessions BIGINT, nodes BIGINT, edges BIGINT, operations BIGINT,
                annotations BIGINT, attributions BIGINT, attribution_scope BIGINT),
                errors STRUCT(kind VARCHAR, rejected BOOLEAN)[], labels BIGINT)[]'
        }
    )
)
select
    partition,
    kind,
    source,
    f.file as file,
    f.size as size,
    f.sha256 as sha256,
    len(f.graph_ids) as n_graphs,
    f."rows".attributions as n_predictions,
    f."rows".nodes as n_nodes,
    f."rows".edges as n_edges,
    coalesce(f.labels, 0) as n_labels,
    len(f.errors) as n_errors,
    len(list_filter(f.errors, lambda e: e.rejected)) as n_rejected,
    case
        when len(f.graph_ids) + f."rows".attributions + coalesce(f.labels, 0) > 0
            and len(list_filter(f.errors, lambda e: e.rejected)) > 0
            then 'partly loaded'
        when len(f.graph_ids) + f."rows".attributions + coalesce(f.labels, 0) > 0 then 'loaded'
        when len(list_filter(f.errors, lambda e: e.rejected)) > 0 then 'rejected'
        else 'unaccounted'
    end as outcome,
    f.graph_ids as graph_ids
from manifests;
