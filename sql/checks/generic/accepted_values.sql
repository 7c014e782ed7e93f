-- accepted_values: rows of {{ model }} whose {{ column }} is not one of the accepted values (NULL is not checked).
select *
from {{ model }}
where {{ column }} is not null
  and {{ column }} not in ({% for v in values %}{{ v | literal }}{{ ", " if not loop.last }}{% endfor %})
