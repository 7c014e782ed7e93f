-- relationships: rows of {{ model }} whose ({{ columns | join(', ') }}) is no ({{ to_columns | join(', ') }})
-- of {{ to }}. Not reported: a row with a NULL in those columns (it refers to nothing){% if unlisted %}, and
-- one whose {{ columns[-1] }} is {{ unlisted | join(' or ') }} (allowed without a row in {{ to }}){% endif %}.
select {% for c in (key + columns) | unique %}x.{{ c }}{{ ", " if not loop.last }}{% endfor %}
from {{ model }} as x
anti join {{ to }} as y on {% for c in columns %}y.{{ to_columns[loop.index0] }} = x.{{ c }}{{ " and " if not loop.last }}{% endfor %}
where {% for c in columns %}x.{{ c }} is not null{{ " and " if not loop.last }}{% endfor %}
{%- if unlisted %}
  and x.{{ columns[-1] }} not in ({% for v in unlisted %}{{ v | literal }}{{ ", " if not loop.last }}{% endfor %})
{%- endif %}
