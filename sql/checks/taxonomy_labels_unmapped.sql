-- taxonomy_labels_unmapped: failure labels that sql/seeds/taxonomy_crosswalk.csv does not map onto a
-- common category (failure_modes_common counts them as 'unmapped'): add them to the crosswalk.
-- asset: annotations
-- severity: warn
-- A label matches as error_label() reads it: as written, or with case, spaces and punctuation ignored.
-- Grain: one row per (taxonomy, label) left unmapped, the spellings of one label (label_key()) together,
-- with how many annotations carry it.
select
    a.taxonomy,
    min(a.error_type) as error_type,
    list(distinct a.error_type order by a.error_type) as spellings,
    count(*) as n_annotations,
    min(a.annotation_id) as example_annotation_id
from annotations a
where a.error_type is not null
  and not exists (
      select 1
      from taxonomy_crosswalk c
      where c.taxonomy = a.taxonomy and c.canonical_label = error_label(a.taxonomy, a.error_type)
  )
group by a.taxonomy, coalesce(nullif(label_key(a.error_type), ''), a.error_type)
