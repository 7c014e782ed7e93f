-- failure_modes_common: every failure annotation once, counted per system, dataset, taxonomy and the
-- common category its label maps onto (sql/seeds/taxonomy_crosswalk.csv). Its grain, columns and tests
-- are declared in _marts.yml.
-- A label is read by its canonical spelling (error_label(): as written, then with case, spaces and
-- punctuation ignored, onto the crosswalk's canonical_label; AgentRx spells one category several
-- ways); a label the crosswalk lacks is 'unmapped' (the check taxonomy_labels_unmapped names it), an
-- annotation without a label 'unlabelled'.
with labelled as (
    select
        a.annotation_id,
        a.system,
        a.dataset,
        coalesce(a.taxonomy, 'none') as taxonomy,
        case
            when a.error_type is null then 'unlabelled'
            else coalesce(
                (select min(c.common_category) from taxonomy_crosswalk c
                 where c.taxonomy = a.taxonomy and c.canonical_label = error_label(a.taxonomy, a.error_type)),
                'unmapped'
            )
        end as common_category
    from annotations a
)
select
    system,
    dataset,
    taxonomy,
    common_category,
    count(*) as n,
    count(*) / sum(count(*)) over (partition by system, dataset, taxonomy) as share
from labelled
group by system, dataset, taxonomy, common_category
order by system, dataset, taxonomy, n desc, common_category
