-- ingest_errors: one row per defect found while reading the sources.
-- rejected = true: the file (or record, see position) did not load; false: loaded, defect noted.
create or replace view ingest_errors as
select * from read_parquet({{ files }});
