"""A second engine reads the committed tables through the Iceberg catalog (issue 19, docs/SCALE.md).

Spark SQL in local mode (pyspark, Debian's OpenJDK) runs the mart ``failure_modes_by_operation``
over the Iceberg snapshot of a committed build and gets the rows `tracehouse sql` reads for that
build. Spark here has no Iceberg connector (its jars come from Maven, which this network does not
reach), so it reads what the connector would: the data files the catalog lists for the snapshot
tagged ``build-N``, found with plain pyiceberg (``scan(snapshot_id=...).plan_files()``), one temp
view per table. pyiceberg's own scan of every table and mart is tests/test_iceberg.py's.

The mart's SQL and the macros it calls (sql/marts/failure_modes_by_operation.sql,
sql/macros/10_classify.sql, 30_failures.sql) are DuckDB's; the Spark version below is translated
by hand, only as far as this one mart needs, and each difference is said where it is made.

The warehouse holds memory graphs (the sample corpus) and small Who&When records written here
(multi-agent graphs: no error type, an annotated agent whose role comes from the seed's regular
expressions), so every branch of the translation decides some row. Build 2 changes one record's
annotated agent; Spark at build 1's snapshot must still read build 1.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

import pyarrow.csv as pacsv
import pytest
from conftest import REPO, build_warehouse

from pipelines.analytics import db
from pipelines.interfaces.cli import main
from pipelines.storage.warehouse import Warehouse

pytest.importorskip("pyspark", reason="pyspark is not installed (it is in the dev extras: pip install -e '.[dev]')")

pytestmark = [
    pytest.mark.skipif(shutil.which("java") is None,
                       reason="no `java` on PATH: Spark needs a JVM (Debian: openjdk-17-jre-headless)"),
    # pyspark 4.3 warns on any pandas >= 3 (the seeds go to Spark as Arrow tables, not through pandas)
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
]

MART = "failure_modes_by_operation"
TABLES = ("annotations", "graphs", "sessions", "operations")  # what the mart reads (through failures())
GRAIN = ("system", "op_name", "op_category", "error_type", "error_class", "responsible_agent")  # _marts.yml
FLOATS = ("share",)

# -- the mart in Spark SQL -----------------------------------------------------------------------------------
# graph_kinds(): the macro's own query, taken from its file (Spark runs it as it is: it has JOIN ... USING).
CLASSIFY_MACROS = (REPO / "sql" / "macros" / "10_classify.sql").read_text()
SPARK_GRAPH_KINDS = "create or replace temp view graph_kinds as " + re.search(
    r"create or replace macro graph_kinds\(\) as table\s+(.*?);", CLASSIFY_MACROS, re.S).group(1)

# failures(), the columns this mart reads. DuckDB's scalar macros are correlated subqueries Spark
# does not run (a correlated scalar subquery with ORDER BY ... LIMIT 1), so:
# * error_class(label): a left join on the seed error_types (error_type is its key: one row at most); a
#   label of another taxonomy than MemTraceBench's is non_memory, as failures() says;
# * operation_type(sys, op, cat) and agent_rule(sys, agent): every seed row that matches, ranked by
#   the macro's ORDER BY with row_number(), rank 1 kept; bool::int is CASE WHEN ... THEN 1 ELSE 0;
#   NULLS LAST written out (DuckDB's default for ASC; Spark's is NULLS FIRST);
# * regexp_full_match(agent, name) (RE2, whole string): Java's regex found in ^(?:name)\z (rlike
#   finds a match anywhere; \z, not $, which would also match before a final newline).
SPARK_FAILURES = r"""
create or replace temp view failures as
with
    base as (
        select
            a.graph_id,
            a.annotation_id,
            a.system,
            k.graph_kind,
            a.error_type,
            case
                when a.taxonomy is not null and a.taxonomy <> 'memtracebench' then 'non_memory'
                when a.error_type is null then 'unlabelled'
                else coalesce(et.error_class, 'memory')
            end as error_class,
            o.op_id,
            o.op_name,
            o.category as op_category,
            a.responsible_agent
        from annotations a
        join graph_kinds k using (graph_id)
        left join operations o on o.graph_id = a.graph_id and o.op_id = a.faulty_op_id
        left join error_types et on et.error_type = a.error_type
    ),
    op_rule as (
        select
            b.graph_id,
            b.annotation_id,
            r.operation_type,
            row_number() over (
                partition by b.graph_id, b.annotation_id
                order by
                    cast(r.priority as int) asc nulls last,
                    (case when r.system <> '*' then 1 else 0 end
                     + case when r.name <> '*' then 1 else 0 end
                     + case when r.category <> '*' then 1 else 0 end) desc nulls last,
                    r.operation_type asc nulls last
            ) as rank
        from base b
        join operation_types r
          on r.kind = 'operation'
         and (r.system = '*' or lower(r.system) = lower(b.system))
         and (r.name = '*' or r.name = b.op_name)
         and (r.category = '*' or r.category = b.op_category)
        where b.op_id is not null
    ),
    agent_rule as (
        select
            b.graph_id,
            b.annotation_id,
            r.agent_role,
            row_number() over (
                partition by b.graph_id, b.annotation_id
                order by
                    cast(r.priority as int) asc nulls last,
                    case when r.system <> '*' then 1 else 0 end desc nulls last,
                    r.agent_role asc nulls last
            ) as rank
        from base b
        join operation_types r
          on r.kind = 'agent'
         and b.responsible_agent is not null
         and (r.system = '*' or lower(r.system) = lower(b.system))
         and b.responsible_agent rlike concat('^(?:', r.name, ')\\z')
    )
select
    b.system,
    b.graph_kind,
    b.error_type,
    b.error_class,
    b.op_name,
    b.op_category,
    o.operation_type,
    b.responsible_agent,
    nullif(g.agent_role, '') as agent_role
from base b
left join op_rule o on o.graph_id = b.graph_id and o.annotation_id = b.annotation_id and o.rank = 1
left join agent_rule g on g.graph_id = b.graph_id and g.annotation_id = b.annotation_id and g.rank = 1
"""

# sql/marts/failure_modes_by_operation.sql. DuckDB's any_value() skips NULLs; Spark's does when its
# second argument is true. count(*) / sum(...) is a double in both. No ORDER BY: rows are compared by key.
SPARK_MART = """
select
    system,
    any_value(graph_kind, true) as graph_kind,
    op_name,
    op_category,
    any_value(operation_type, true) as operation_type,
    error_type,
    error_class,
    responsible_agent,
    any_value(agent_role, true) as agent_role,
    count(*) as n,
    count(*) / sum(count(*)) over (partition by system) as share
from failures
group by system, op_name, op_category, error_type, error_class, responsible_agent
"""


# -- the warehouse ----------------------------------------------------------------------------------------


def whowhen_record(agents: list[str], mistake_agent: str, mistake_step: int | None, question_id: str,
                   key: str = "name") -> dict[str, Any]:
    """A Who&When record: CaptainAgent names a step's agent in ``name``, Magentic-One in ``role``."""
    history = [{"name": agent, "role": "assistant"} if key == "name" else {"role": agent} for agent in agents]
    history = [entry | {"content": f"turn {i}"} for i, entry in enumerate(history)]
    record = {"question": f"question {question_id[:8]}", "question_ID": question_id, "ground_truth": "4",
              "is_correct": False, "history": history, "mistake_agent": mistake_agent,
              "mistake_reason": "a wrong count"}
    return record if mistake_step is None else record | {"mistake_step": str(mistake_step)}


def write_whowhen(root: Path, magentic_agent: str, magentic_step: int) -> None:
    """Five CaptainAgent records and one Magentic-One record (Who&When's folder layout)."""
    team = ["Excel_Expert", "Computer_terminal", "Verification_Expert"]
    records = {
        # the expert's message; twice (records 1 and 4): one group of n = 2
        "Algorithm-Generated/1.json": whowhen_record(team, "Excel_Expert", 0, "4d51c4bf-4b0e-4f3d-897b-3f6687a7d9f2"),
        "Algorithm-Generated/4.json": whowhen_record(team, "Excel_Expert", 2, "8e867cd7-cff9-4e6c-867a-ff5ddc2550be"),
        # the terminal's turn: role terminal (a case-insensitive rule), op code_execution
        "Algorithm-Generated/2.json": whowhen_record(team, "Computer_terminal", 1, "a" * 64),
        # an expert whose name holds a browser agent's: the whole name must match (expert, not web_surfer)
        "Algorithm-Generated/3.json": whowhen_record(
            ["WebSurfer_Expert", *team[1:]], "WebSurfer_Expert", 0, "c61d22de-5f6c-4958-a7f6-5e9707bd3466"),
        # no mistake step: no faulty operation (op_name and operation_type NULL)
        "Algorithm-Generated/5.json": whowhen_record(team, "Verification_Expert", None, "c" * 64),
        "Hand-Crafted/1.json": whowhen_record(
            ["human", "Orchestrator (thought)", "Orchestrator (-> WebSurfer)", "WebSurfer",
             "Orchestrator (termination condition)"],
            magentic_agent, magentic_step, "b" * 64, key="role"),
    }
    for rel, record in records.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(json.dumps(record))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`tracehouse build --iceberg` (build 1), then build 2 after the Magentic-One record's annotated
    agent changed from WebSurfer (step 3) to Orchestrator (step 1)."""
    from pipelines.sample.corpus import generate_corpus

    root = tmp_path_factory.mktemp("spark")
    corpus, whowhen, warehouse = root / "corpus", root / "whowhen", root / "W"
    generate_corpus(corpus, seed=2, graphs_per_split=2)
    write_whowhen(whowhen, "WebSurfer", 3)
    sources = [f"sample:memtracebench={corpus}", f"whowhen={whowhen}"]
    flags = [arg for source in sources for arg in ("--source", source)]
    assert main(["build", *flags, "--warehouse", str(warehouse), "--iceberg", "--quiet"]) == 0
    write_whowhen(whowhen, "Orchestrator", 1)
    second = build_warehouse(warehouse, sources)
    assert second.ok and second.build == 2, second
    return warehouse


LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One local Spark for the module: two cores, small memory, no UI, UTC, loopback only, errors only."""
    from pyspark.sql import SparkSession

    folder = tmp_path_factory.mktemp("spark-session")
    (folder / "log4j2.properties").write_text(LOG4J2)  # quiet from the JVM's start, not after it
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("tracehouse-test-spark")
        .config("spark.driver.memory", "512m")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={folder / 'log4j2.properties'}")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(folder / "spark-warehouse"))
    )
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SPARK_LOCAL_IP", "127.0.0.1")  # the JVM's own address: loopback, not the first interface
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


# -- reading -------------------------------------------------------------------------------------------------


def plain_catalog(warehouse: Path) -> Any:
    """The catalog as any pyiceberg user opens it: no tracehouse code."""
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog("tracehouse", uri=f"sqlite:///{warehouse / 'iceberg' / 'catalog.db'}")


def snapshot_files(warehouse: Path, build: int, names: tuple[str, ...]) -> dict[str, list[str]]:
    """The data files of each table's snapshot tagged ``build-<build>`` (the snapshot
    ``iceberg/builds/<build>.json`` names for it: one consistent build across tables)."""
    catalog = plain_catalog(warehouse)
    ids = json.loads((warehouse / "iceberg" / "builds" / f"{build:08d}.json").read_text())["tables"]
    files = {}
    for name in names:
        table = catalog.load_table(f"tracehouse.{name}")
        snapshot = table.snapshot_by_name(f"build-{build}")
        assert snapshot is not None and snapshot.snapshot_id == ids[name], name
        assert snapshot.summary["tracehouse.build"] == str(build), name
        files[name] = sorted(task.file.file_path for task in table.scan(snapshot_id=snapshot.snapshot_id).plan_files())
        assert files[name] and all(Path(path).is_file() for path in files[name]), name
    return files


def spark_views(spark: Any, warehouse: Path, build: int) -> dict[str, list[str]]:
    """Temp views named like the tables over build ``build``'s snapshot files, the seeds (files of the
    repository, not warehouse tables: read as `tracehouse sql` reads them), and the mart's views."""
    files = snapshot_files(warehouse, build, TABLES)
    for name, paths in files.items():
        spark.read.parquet(*paths).createOrReplaceTempView(name)
    for seed in ("error_types", "operation_types"):
        spark.createDataFrame(pacsv.read_csv(db.SQL_DIR / "seeds" / f"{seed}.csv")).createOrReplaceTempView(seed)
    spark.sql(SPARK_GRAPH_KINDS)
    spark.sql(SPARK_FAILURES)
    return files


def spark_mart(spark: Any, warehouse: Path, build: int) -> tuple[list[str], list[dict[str, Any]]]:
    spark_views(spark, warehouse, build)
    frame = spark.sql(SPARK_MART)
    return frame.columns, [row.asDict() for row in frame.collect()]


def tracehouse_sql(warehouse: Path, build: int, query: str) -> tuple[list[str], list[dict[str, Any]]]:
    """What `tracehouse sql --build <build> QUERY` reads."""
    con = db.connect(Warehouse(warehouse), build=build)
    try:
        cursor = con.execute(query)
        columns = [d[0] for d in cursor.description]
        return columns, [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
    finally:
        con.close()


def by_grain(rows: list[dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
    keyed = {tuple(row[c] for c in GRAIN): row for row in rows}
    assert len(keyed) == len(rows), "the grain is not unique"
    return keyed


def sort_key(key: tuple) -> tuple:
    return tuple((value is None, value or "") for value in key)


def assert_same_rows(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    """Same keys, same counts and texts exactly; the shares within float rounding."""
    got_rows, want_rows = by_grain(got), by_grain(want)
    assert sorted(got_rows, key=sort_key) == sorted(want_rows, key=sort_key)
    for key, row in want_rows.items():
        other = got_rows[key]
        assert {c: v for c, v in other.items() if c not in FLOATS} == {c: v for c, v in row.items() if c not in FLOATS}
        for column in FLOATS:
            assert math.isclose(other[column], row[column], rel_tol=1e-12), (key, column)


# -- the tests -----------------------------------------------------------------------------------------------


def test_spark_runs_the_mart_over_the_committed_snapshot_and_gets_tracehouse_sql_rows(built: Path, spark: Any) -> None:
    columns, want = tracehouse_sql(built, 2, f"select * from {MART}")
    got_columns, got = spark_mart(spark, built, 2)
    assert got_columns == columns
    assert_same_rows(got, want)
    # the rows compared are the ones the translation can get wrong
    rows = by_grain(got)
    assert len(rows) >= 10 and {row["graph_kind"] for row in got} == {"memory", "multi_agent"}
    assert max(row["n"] for row in got) >= 2
    assert rows["captainagent", "agent_message", "agent_message", None, "unlabelled", "Excel_Expert"] == {
        "system": "captainagent", "graph_kind": "multi_agent", "op_name": "agent_message",
        "op_category": "agent_message", "operation_type": "communication", "error_type": None,
        "error_class": "unlabelled", "responsible_agent": "Excel_Expert", "agent_role": "expert", "n": 2,
        "share": 0.4}
    roles = {row["responsible_agent"]: (row["op_name"], row["operation_type"], row["agent_role"])
             for row in got if row["graph_kind"] == "multi_agent"}
    assert roles == {
        "Excel_Expert": ("agent_message", "communication", "expert"),
        "WebSurfer_Expert": ("agent_message", "communication", "expert"),  # a whole-name match
        "Computer_terminal": ("code_execution", "code", "terminal"),
        "Verification_Expert": (None, None, "expert"),  # no faulty operation
        "Orchestrator": ("plan", "planning", "orchestrator"),  # build 2's Magentic-One annotation
    }
    judged = [row for row in got if row["op_name"] == "llm-judge"]  # a memory graph's non-memory label
    assert judged and all(r["operation_type"] == "judge" and r["error_class"] == "non_memory" for r in judged)
    assert all(row["agent_role"] is None for row in got if row["graph_kind"] == "memory")
    memory_types = {row["operation_type"] for row in got if row["graph_kind"] == "memory"}
    assert {"extraction", "retrieval", "response"} <= memory_types


def test_spark_reads_the_snapshot_of_the_build_it_is_given(built: Path, spark: Any) -> None:
    """After build 2, the files of the snapshot tagged build-1 still give build 1's rows."""
    build1, build2 = snapshot_files(built, 1, TABLES), snapshot_files(built, 2, TABLES)
    assert set(build1["annotations"]) - set(build2["annotations"])  # build 2 replaced a file of build 1
    _, want1 = tracehouse_sql(built, 1, f"select * from {MART}")
    _, want2 = tracehouse_sql(built, 2, f"select * from {MART}")
    _, got1 = spark_mart(spark, built, 1)
    assert_same_rows(got1, want1)
    assert sorted(by_grain(got1), key=sort_key) != sorted(by_grain(want2), key=sort_key)
    magentic = [(r["responsible_agent"], r["op_name"], r["agent_role"]) for r in got1 if r["system"] == "magentic-one"]
    assert magentic == [("WebSurfer", "browse", "web_surfer")]  # build 2 has Orchestrator, plan, orchestrator


def test_spark_reads_the_mart_table_itself_at_the_same_snapshot(built: Path, spark: Any) -> None:
    """The mart is an Iceberg table too: its snapshot's file, read by Spark, holds the same rows."""
    columns, want = tracehouse_sql(built, 2, f"select * from {MART}")
    (path,) = snapshot_files(built, 2, (MART,))[MART]
    frame = spark.read.parquet(path)
    assert frame.columns == columns
    assert_same_rows([row.asDict() for row in frame.collect()], want)
