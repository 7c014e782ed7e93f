-- failure_spans: every span of the OpenTelemetry traces among failure_rows (the rows of failures.sql,
-- a temp table), what a trace's failure view draws as a waterfall (dashboards/failure_view.py puts
-- them in tree order: children after their parent, by start time).
-- Grain: one row per operation (span) of those graphs.
-- Columns:
--   graph_id, op_id, parent_op_id      the span and its parent span (null: a root)
--   op_name, category, span_kind       its name, semantic kind (LLM, TOOL, chat, ...) and SpanKind
--   operation_type                     the cross-system operation type of its kind (seed operation_types)
--   step                               its position in the trace by start time (ties: span id)
--   start_us, end_us                   start and end, microseconds since the epoch (null when unknown)
--   duration_ms                        end - start in milliseconds (null when either is unknown)
--   status, status_message             ok | error | unset, and the status description as written
--   model, input_tokens, output_tokens the model and token counts the span records
--   actor                              the agent (gen_ai.agent.name of the span or its nearest ancestor)
with
    traces as (select distinct graph_id from failure_rows where is_trace),
    ops as (
        select o.*, g.system
        from operations o
        join graphs g using (graph_id)
        where o.graph_id in (select graph_id from traces)
    ),
    types as (
        select system, op_name, category, operation_type(system, op_name, category) as operation_type
        from (select distinct system, op_name, category from ops)
    )
select
    ops.graph_id,
    ops.op_id,
    ops.parent_op_id,
    ops.op_name,
    ops.category,
    ops.span_kind,
    t.operation_type,
    ops.step,
    epoch_us(ops.start_time) as start_us,
    epoch_us(ops.end_time) as end_us,
    (epoch_us(ops.end_time) - epoch_us(ops.start_time)) / 1000.0 as duration_ms,
    ops.status,
    ops.status_message,
    ops.model,
    ops.input_tokens,
    ops.output_tokens,
    ops.actor
from ops
left join types t on t.system = ops.system and t.op_name is not distinct from ops.op_name
                 and t.category is not distinct from ops.category
order by ops.graph_id, ops.start_time nulls last, ops.step, ops.op_id
