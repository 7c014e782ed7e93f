-- op_subgraph: the faulty operation with its input and output nodes (the op_subgraph macro).
-- Grain: one row per (role, node). Parameters: $graph_id, $op_id.
-- Columns: those of op_subgraph() (sql/macros/20_lineage.sql): graph_id, op_id, op_name, op_category,
--   op_session_id, actor, role ('input' | 'output'), full_node_id, class_name, category, session_id,
--   version, value
select * from op_subgraph($graph_id, $op_id)
