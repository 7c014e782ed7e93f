-- attribution_confusion: which error type each method predicts for each annotated error type
-- (memory cases; a case without a prediction has predicted_error_type NULL).
-- Its grain, columns and tests are declared in _marts.yml.
select
    method,
    system,
    error_type as annotated_error_type,
    predicted_error_type,
    count(*) as n
from attribution_cases()
where graph_kind = 'memory' and error_type is not null  -- no annotated label, nothing to confuse it with
group by all
order by method, system, annotated_error_type, predicted_error_type nulls last
