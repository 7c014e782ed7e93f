-- duplicate_annotation_keys: (graph_id, annotation_id) keys held by more than one row of annotations.
-- asset: annotations
-- severity: error
-- Grain: one row per repeated key; copies = how many rows hold it. The key is schema.PRIMARY_KEYS["annotations"].
select graph_id, annotation_id, count(*) as copies
from annotations
group by graph_id, annotation_id
having count(*) > 1
