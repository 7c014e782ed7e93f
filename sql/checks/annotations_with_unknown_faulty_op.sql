-- annotations_with_unknown_faulty_op: annotations whose faulty_op_id is not an operation of their graph.
-- asset: annotations
-- severity: error
-- Grain: one row per such annotation. A null faulty_op_id (MemTraceBench writes "null" for the
-- non-memory labels; the reader stores NULL) names no operation and is not reported.
select a.graph_id, a.annotation_id, a.faulty_op_id, a.error_type
from annotations as a
anti join operations as o on o.graph_id = a.graph_id and o.op_id = a.faulty_op_id
where a.faulty_op_id is not null
