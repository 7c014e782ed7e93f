-- duplicate_operation_keys: (graph_id, op_id) keys held by more than one row of operations.
-- asset: operations
-- severity: error
-- Grain: one row per repeated key; copies = how many rows hold it. The key is schema.PRIMARY_KEYS["operations"].
select graph_id, op_id, count(*) as copies
from operations
group by graph_id, op_id
having count(*) > 1
