-- duplicate_edge_keys: (graph_id, edge_id) keys held by more than one row of edges.
-- asset: edges
-- severity: error
-- Grain: one row per repeated key; copies = how many rows hold it. The key is schema.PRIMARY_KEYS["edges"].
select graph_id, edge_id, count(*) as copies
from edges
group by graph_id, edge_id
having count(*) > 1
