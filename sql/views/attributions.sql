-- attributions: described in _views.yml; its columns are pipelines/schema.py's (docs/TABLES.md).
create or replace view attributions as
select * from read_parquet({{ files }});
