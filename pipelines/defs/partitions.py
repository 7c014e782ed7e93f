"""Tables are partitioned by source split (``<source>__<split>``); new splits are added on the fly."""

import dagster as dg

source_splits = dg.DynamicPartitionsDefinition(name="source_splits")
