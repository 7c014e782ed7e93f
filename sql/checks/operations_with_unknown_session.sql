-- operations_with_unknown_session: operations whose session_id is not a session of their graph.
-- asset: operations
-- severity: error
-- Grain: one row per such row of operations. A null session_id names no session. smartcomment's sentinel
-- session '__none__' (pipelines.readers.smartcomment.NONE_SESSION, used by its COMMENT:NONE@1 node)
-- may be referenced without being listed in sessions, as the reader allows.
select x.graph_id, x.op_id, x.session_id
from operations as x
anti join sessions as s on s.graph_id = x.graph_id and s.session_id = x.session_id
where x.session_id is not null and x.session_id <> '__none__'
