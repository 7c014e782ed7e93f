-- operation_links: the operation DAG of every graph, one row per (graph, operation, operation it
-- feeds). Its grain, columns and tests are declared in _marts.yml. Operation A feeds B when a node
-- that is the target of one of A's edges is the source of one of B's edges (A <> B). The join runs
-- on the integer keys written at ingest (graph_key, node_index), not on node id strings.
--
-- Computed per partition (one fragment per partition generation): a rebuild of one split joins that
-- split's edges only, and attribution_op_distance walks these rows instead of joining all edges
-- again (at 10 M nodes the join was 10 of its 24 s of CPU: BENCHMARKS.md). No ORDER BY: the
-- fragments are combined in the declared combine_order, and sorting the 6 M rows of 10 M nodes
-- here cost about 2 s more.
select distinct e1.graph_id, e1.op_id as from_op_id, e2.op_id as to_op_id
from edges e1
join edges e2 on e2.graph_key = e1.graph_key and e2.source_node_index = e1.target_node_index
where e1.op_id <> e2.op_id
