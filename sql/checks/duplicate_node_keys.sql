-- duplicate_node_keys: (graph_id, full_node_id) keys held by more than one row of nodes.
-- asset: nodes
-- severity: error
-- Grain: one row per repeated key; copies = how many rows hold it. The key is schema.PRIMARY_KEYS["nodes"].
select graph_id, full_node_id, count(*) as copies
from nodes
group by graph_id, full_node_id
having count(*) > 1
