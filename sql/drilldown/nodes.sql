-- nodes: some nodes of one graph, for the boxes of a drill-down picture.
-- Grain: one row per node. Parameters: $graph_id, $ids (a list of full_node_id).
-- Columns: full_node_id, class_name, version, category, session_id, value
select full_node_id, class_name, version, category, session_id, value
from nodes
where graph_id = $graph_id and list_contains($ids, full_node_id)
