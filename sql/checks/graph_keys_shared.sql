-- graph_keys_shared: graphs whose graph_key another graph has too.
-- asset: graphs
-- severity: error
-- Grain: one row per graph whose key is shared. graph_key is a 64-bit digest of graph_id (written at
-- ingest by pipelines/readers/base.py): the marts join nodes and edges on (graph_key, node_index), so
-- two graphs sharing a key would mix their walks. Odds at 10 M graphs: about 3 in a million.
select g.graph_id, g.graph_key, count(*) over (partition by g.graph_key) as graphs_with_this_key
from graphs g
qualify count(*) over (partition by g.graph_key) > 1
