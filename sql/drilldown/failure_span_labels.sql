-- failure_span_labels: the labelled spans of the traces among failure_rows (the rows of
-- failures.sql, a temp table): every annotation of those graphs, whichever source it came from, so a
-- trace's view marks each labelled span and is written again when a label is added or removed.
-- Grain: one row per annotation of those graphs that names a span.
-- Columns: graph_id, op_id (the annotation's faulty_op_id), annotation_id, error_type
select a.graph_id, a.faulty_op_id as op_id, a.annotation_id, a.error_type
from annotations a
where a.graph_id in (select graph_id from failure_rows where is_trace) and a.faulty_op_id is not null
order by a.graph_id, a.faulty_op_id, a.annotation_id
