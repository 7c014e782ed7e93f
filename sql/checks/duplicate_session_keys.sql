-- duplicate_session_keys: (graph_id, session_id) keys held by more than one row of sessions.
-- asset: sessions
-- severity: error
-- Grain: one row per repeated key; copies = how many rows hold it. The key is schema.PRIMARY_KEYS["sessions"].
select graph_id, session_id, count(*) as copies
from sessions
group by graph_id, session_id
having count(*) > 1
