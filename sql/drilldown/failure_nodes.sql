-- failure_nodes: the nodes the failure views show (failure_wanted, a temp table of graph_id and
-- full_node_id), each value cut to its first $chars characters (views embed at most that much).
-- Grain: one row per wanted node that exists.
-- Columns: graph_id, full_node_id, class_name, version, category, session_id, value_bytes (the whole
--   value's UTF-8 length), value (its first $chars characters), value_chars (the whole value's length)
select n.graph_id, n.full_node_id, n.class_name, n.version, n.category, n.session_id, n.value_bytes,
       left(n.value, $chars) as value, length(n.value) as value_chars
from nodes n
semi join failure_wanted w on w.graph_id = n.graph_id and w.full_node_id = n.full_node_id
