-- attribution_trail_scores: each failure-attribution method scored on TRAIL-labelled traces
-- (annotations of taxonomy 'trail': error_type = category, faulty_op_id = location, a span id) by
-- TRAIL's own rules (benchmarking/calculate_scores.py of patronus-ai/trail-benchmark), per system and
-- dataset. Its grain, columns and tests are declared in _marts.yml; docs/ATTRIBUTION.md.
--
-- TRAIL scores a trace's predicted errors against its labelled errors as sets, not one to one:
--   location accuracy = |labelled locations ∩ predicted locations| / |labelled locations|, per trace;
--   joint accuracy    = |labelled (location, category) ∩ predicted ones| / |labelled ones|, per trace;
--   both averaged over the traces; categories compared after trail_category() (TRAIL's normalization);
--   category F1 = weighted F1 of the per-trace category sets (multi-label: per category, a trace is a
--   true positive when both sets hold it, a false positive when only the prediction does, a false
--   negative when only the labels do), each category's F1 weighted by its support (traces labelled
--   with it).
-- A method's predicted errors on a trace are its predictions on the trace's TRAIL annotations (each
-- names one; only the set matters). A trace it predicted nothing on has an empty set (0, as TRAIL's
-- scorer); a trace whose predictions all lack a location (op_id) has no location score (NULL, left
-- out of the average), likewise category (error_type) and joint (a pair needs both).
with
    trail as (select annotation_id from annotations where taxonomy = 'trail'),
    cases as materialized (
        select c.method, c.system, c.dataset, c.graph_id, c.annotation_id, c.predicted,
               c.faulty_op_id, trail_category(c.error_type) as category,
               c.predicted_op_id, trail_category(c.predicted_error_type) as predicted_category
        from attribution_cases() c
        semi join trail t using (annotation_id)
    ),
    traces as (  -- one row per (method, trace): the labelled and the predicted sets
        select
            method, system, dataset, graph_id,
            count(*) as n_errors,
            bool_or(predicted) as predicted,
            bool_or(predicted and predicted_op_id is not null) as has_location,
            bool_or(predicted and predicted_category is not null) as has_category,
            bool_or(predicted and predicted_op_id is not null and predicted_category is not null) as has_pair,
            list(distinct faulty_op_id) filter (where faulty_op_id is not null) as gt_locations,
            list(distinct predicted_op_id) filter (where predicted and predicted_op_id is not null)
                as predicted_locations,
            list(distinct {'op': faulty_op_id, 'category': category})
                filter (where faulty_op_id is not null and category is not null) as gt_pairs,
            list(distinct {'op': predicted_op_id, 'category': predicted_category})
                filter (where predicted and predicted_op_id is not null and predicted_category is not null)
                as predicted_pairs,
            list(distinct category) filter (where category is not null) as gt_categories,
            list(distinct predicted_category) filter (where predicted and predicted_category is not null)
                as predicted_categories
        from cases
        group by method, system, dataset, graph_id
    ),
    per_trace as (
        select
            *,
            case
                when coalesce(len(gt_locations), 0) = 0 then null
                when not predicted then 0.0
                when not has_location then null
                else len(list_intersect(gt_locations, predicted_locations)) / len(gt_locations)
            end as location_accuracy,
            case
                when coalesce(len(gt_pairs), 0) = 0 then null
                when not predicted then 0.0
                when not has_pair then null
                else len(list_intersect(gt_pairs, predicted_pairs)) / len(gt_pairs)
            end as joint_accuracy,
            coalesce(len(gt_categories), 0) > 0 and (not predicted or has_category) as category_scored
        from traces
    ),
    category_rows as (  -- per (method, trace, category) of either set, on the traces scored for category
        select method, system, dataset, graph_id, cat,
               list_contains(gt_categories, cat) as labelled,
               list_contains(coalesce(predicted_categories, []), cat) as named
        from per_trace,
             unnest(list_distinct(list_concat(gt_categories, coalesce(predicted_categories, [])))) as u(cat)
        where category_scored
    ),
    per_category as (
        select method, system, dataset, cat,
               count(*) filter (where labelled) as support,
               count(*) filter (where labelled and named) as tp,
               count(*) filter (where named and not labelled) as fp,
               count(*) filter (where labelled and not named) as fn
        from category_rows
        group by all
    ),
    category_f1 as (
        select method, system, dataset,
               sum(support * case when 2 * tp + fp + fn = 0 then 0 else 2 * tp / (2 * tp + fp + fn) end)
                   / nullif(sum(support), 0) as category_f1
        from per_category
        group by all
    )
select
    p.method,
    p.system,
    p.dataset,
    count(*) as n_traces,
    sum(p.n_errors)::bigint as n_errors,
    count(*) filter (where p.predicted) as n_traces_predicted,
    count(p.location_accuracy) as n_traces_location,
    avg(p.location_accuracy) as location_accuracy,
    count(*) filter (where p.category_scored) as n_traces_category,
    any_value(f.category_f1) as category_f1,
    count(p.joint_accuracy) as n_traces_joint,
    avg(p.joint_accuracy) as joint_accuracy,
    starts_with(p.method, 'baseline:') as is_baseline
from per_trace p
left join category_f1 f using (method, system, dataset)
group by p.method, p.system, p.dataset
order by p.method, p.system, p.dataset
