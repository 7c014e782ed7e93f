-- attribution_op_distance: where the memory-system methods' operation guesses land relative to the
-- annotated faulty operation, as a signed number of hops on the information flow (negative:
-- upstream of it, 0: the operation itself, positive: downstream); guesses on no path are counted
-- per method as 'unrelated'. From the attribution_op_distance mart.
-- Grain: one row per (method, system, relation, hops) with a path; unrelated guesses fold into
-- every row of the method as method_label.
-- Columns:
--   method          the attribution method
--   method_label    the method and its guesses on no path ('simulated-hasty (31 unrelated)')
--   system          the memory system
--   relation        'exact' | 'upstream' | 'downstream'
--   signed_hops     0 for exact, -hops upstream, +hops downstream
--   n               guesses
with unrelated as (
    select method, sum(n) filter (where relation = 'unrelated') as unrelated
    from attribution_op_distance
    group by method
)
select
    d.method,
    format('{} ({} unrelated)', d.method, coalesce(u.unrelated, 0)) as method_label,
    d.system,
    d.relation,
    case d.relation when 'exact' then 0 when 'upstream' then -d.hops else d.hops end::bigint as signed_hops,
    sum(d.n)::bigint as n
from attribution_op_distance as d
join unrelated as u using (method)
where d.relation in ('exact', 'upstream', 'downstream')
group by all
order by d.method, d.system, signed_hops
