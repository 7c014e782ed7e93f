-- failure_modes_across_taxonomies: every taxonomy's failure annotations over the common failure
-- categories (the crosswalk seed), side by side: one normalized bar per taxonomy, split by common
-- category, from the failure_modes_common mart (summed over datasets).
-- Grain: one row per (taxonomy, system, common_category).
-- Columns:
--   taxonomy          the label set (memtracebench, agentrx, trail, ...; 'none' for annotations
--                     without a label: Who&When, TracerTraj)
--   system            the system
--   common_category   the common category of the label's canonical spelling (error_label()), so every
--                     spelling of a label counts in one category; 'unmapped' for a label the crosswalk
--                     lacks, 'unlabelled'
--                     for an annotation without a label
--   n                 failure annotations of the system and taxonomy in the category
--   taxonomy_total    all failure annotations of the taxonomy (every system): the denominator of share
--   share             n / taxonomy_total
--   informative       false for 'unlabelled' rows: a chart of only those says nothing (hidden)
with
    per_system as (
        select taxonomy, system, common_category, sum(n)::bigint as n
        from failure_modes_common
        group by taxonomy, system, common_category
    )
select
    p.taxonomy,
    p.system,
    p.common_category,
    p.n,
    sum(p.n) over (partition by p.taxonomy) as taxonomy_total,
    p.n / sum(p.n) over (partition by p.taxonomy) as share,
    p.common_category <> 'unlabelled' as informative
from per_system p
order by p.taxonomy, p.n desc, p.common_category, p.system
