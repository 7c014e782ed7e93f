-- attribution_confusion: which error type each method predicts for each annotated error type
-- (memory systems; '(no prediction)' where a method named none). From the attribution_confusion mart.
-- Grain: one row per (method, system, annotated_error_type, predicted_error_type).
-- Columns:
--   method                 the attribution method, or a baseline
--   system                 the memory system
--   annotated_error_type   the label
--   predicted_error_type   the method's error type, or '(no prediction)'
--   n                      cases
--   correct                predicted = annotated
select
    method,
    system,
    annotated_error_type,
    coalesce(predicted_error_type, '(no prediction)') as predicted_error_type,
    n::bigint as n,
    predicted_error_type is not distinct from annotated_error_type as correct
from attribution_confusion
where annotated_error_type is not null
order by method, system, annotated_error_type, predicted_error_type
