-- taxonomy_labels_unmapped: failure labels that sql/seeds/taxonomy_crosswalk.csv does not map onto a
-- common category (failure_modes_common counts them as 'unmapped'): add them to the crosswalk.
-- asset: annotations
-- severity: warn
-- A label matches as written or with case, spaces and punctuation ignored, as in failure_modes_common.
-- Grain: one row per (taxonomy, error_type) left unmapped, with how many annotations carry it.
select
    a.taxonomy,
    a.error_type,
    count(*) as n_annotations,
    min(a.annotation_id) as example_annotation_id
from annotations a
where a.error_type is not null
  and not exists (
      select 1
      from taxonomy_crosswalk c
      where c.taxonomy = a.taxonomy
        and (c.label = a.error_type
             or regexp_replace(lower(c.label), '[^a-z0-9]', '', 'g')
                = regexp_replace(lower(a.error_type), '[^a-z0-9]', '', 'g'))
  )
group by a.taxonomy, a.error_type
