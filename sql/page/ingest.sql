-- ingest: what the build could not load, for the dashboard's header (one row).
-- Grain: one row, from the ingest_errors table.
-- Columns:
--   rejected         ingest_errors rows with rejected true: files and records that did not load
--   rejected_files   distinct files with at least one of those rows
--   noted            rows with rejected false: defects noted in what loaded
--   kinds            the rejected rows per kind, most frequent first: a list of {kind, n}
with rejected_kinds as (
    select kind, count(*) as n
    from ingest_errors
    where rejected
    group by kind
)
select
    (select count(*) from ingest_errors where rejected) as rejected,
    (select count(distinct (source, split, file)) from ingest_errors where rejected) as rejected_files,
    (select count(*) from ingest_errors where not rejected) as noted,
    coalesce((select list({'kind': kind, 'n': n} order by n desc, kind) from rejected_kinds), []) as kinds
