-- not_null: rows of {{ model }} whose {{ column }} is NULL.
select *
from {{ model }}
where {{ column }} is null
