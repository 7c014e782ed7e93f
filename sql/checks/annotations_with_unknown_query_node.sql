-- annotations_with_unknown_query_node: annotations whose query_id is not a node of their graph.
-- asset: annotations
-- severity: error
-- Grain: one row per such annotation. A null query_id is not reported.
select a.graph_id, a.annotation_id, a.query_id
from annotations as a
anti join nodes as n on n.graph_id = a.graph_id and n.full_node_id = a.query_id
where a.query_id is not null
