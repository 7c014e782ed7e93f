-- edges_with_unknown_endpoint: edge endpoints (source or target) that are not a node of the edge's graph.
-- asset: edges
-- severity: error
-- Grain: one row per dangling endpoint; columns graph_id, edge_id, endpoint ('source'/'target'), full_node_id.
select e.graph_id, e.edge_id, 'source' as endpoint, e.source_full_node_id as full_node_id
from edges as e
anti join nodes as n on n.graph_id = e.graph_id and n.full_node_id = e.source_full_node_id
union all
select e.graph_id, e.edge_id, 'target' as endpoint, e.target_full_node_id as full_node_id
from edges as e
anti join nodes as n on n.graph_id = e.graph_id and n.full_node_id = e.target_full_node_id
