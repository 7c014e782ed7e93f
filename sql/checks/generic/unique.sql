-- unique: rows of {{ model }} that share one ({{ columns | join(', ') }}); one row per repeated value,
-- copies = how many rows hold it (NULLs count as one value, as in GROUP BY).
select {{ columns | join(', ') }}, count(*) as copies
from {{ model }}
group by {{ columns | join(', ') }}
having count(*) > 1
