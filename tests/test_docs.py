"""The docs say what the code does: every column, check and command is documented, every count and
name a doc states is the code's. Marts, charts and source kinds are described by their declarations
(the YAML entries, the reader modules), not listed in the docs: a doc may name some, and each it
names exists (tests/test_adding.py adds one of each and runs these tests on that copy)."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import REPO

from pipelines import schema
from pipelines.interfaces.cli import COMMANDS, make_parser


def doc(name: str) -> str:
    return (REPO / name).read_text()


def test_every_column_of_every_table_is_documented() -> None:
    text = doc("docs/TABLES.md")
    for table, table_schema in schema.TABLES.items():
        section = text.split(f"## {table} ", 1)[1].split("\n## ", 1)[0]
        for field in table_schema:
            assert re.search(rf"\b{field.name}\b", section), f"{table}.{field.name} missing from docs/TABLES.md"


def test_every_check_is_documented() -> None:
    for check in sorted((REPO / "sql" / "checks").glob("*.sql")):
        name = check.stem
        generic = re.sub(r"^duplicate_\w+_keys$", "duplicate_<row>_keys", name)
        generic = re.sub(r"^(nodes|operations|edges)_with_unknown_session$", "<table>_with_unknown_session", generic)
        assert name in doc("docs/VALIDATION.md") or generic in doc("docs/VALIDATION.md"), name


def test_every_command_is_in_the_readme_and_the_help() -> None:
    readme, help_text = doc("README.md"), make_parser().format_help()
    for command in COMMANDS:
        assert f"tracehouse {command}" in readme, command
        assert command in help_text, command


def test_the_readme_commands_are_the_makefile_and_ci_ones() -> None:
    readme, makefile = doc("README.md"), doc("Makefile")
    assert "make run" in readme and "make test" in readme
    assert re.search(r"^run:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    ci = [line for line in doc(".ci/run").splitlines() if line and not line.startswith("#")]
    assert ci[-1] == "make test"
    assert (REPO / ".python-version").read_text().strip() == "3.12"


def test_every_dagster_package_is_pinned_in_lockstep() -> None:
    """Dagster's core packages share one version (1.M.P); its integration libraries (dagster-dask) are
    released with it as 0.(M+16).P and pin that core version exactly."""
    def core(version: str) -> str:
        major, minor, patch = version.split(".")
        return version if major == "1" else f"1.{int(minor) - 16}.{patch}"

    pins = re.findall(r'"(dagster[\w-]*)==([\d.]+)"', doc("pyproject.toml"))
    assert len(pins) >= 2 and len({core(version) for _, version in pins}) == 1, pins
    assert Path(REPO / "pyproject.toml").read_text().count("==") >= 15  # every dependency pinned


_REPO_PATH = re.compile(
    r"(?<![\w/.<-])((?:pipelines|sql|docs|tests|dashboards|expectations|bench)/[\w./-]*\.(?:py|sql|md|yml|json|csv|j2|css|js|toml))\b"
)


def test_every_path_a_doc_names_exists() -> None:
    """Paths of the repository named in README.md, BENCHMARKS.md and docs/ (files with a suffix; the
    warehouse's own paths such as dashboards/index.html are not repository files and have none of
    those suffixes)."""
    docs = [REPO / "README.md", REPO / "BENCHMARKS.md", *sorted((REPO / "docs").glob("*.md")),
            *sorted((REPO / "pipelines").rglob("*.py")), *sorted((REPO / "dashboards").rglob("*.py"))]
    missing = []
    for path in docs:
        for match in _REPO_PATH.finditer(path.read_text()):
            if not (REPO / match.group(1)).exists():
                missing.append(f"{path.name}: {match.group(1)}")
    assert missing == []


def test_every_mart_view_seed_macro_and_check_is_declared_and_described() -> None:
    from pipelines.analytics import catalog

    for mart in catalog.marts().values():  # loading checks that every file has its declaration
        assert mart.description and mart.grain and set(mart.columns) and all(mart.columns.values()), mart.name
    assert set(catalog.views()) == {*schema.TABLES, "input_files"}
    assert all(v["description"] for v in catalog.views().values())
    assert all(s["description"] and s["columns"] for s in catalog.seeds().values())
    assert all(m["description"] and m["signature"] for m in catalog.macros().values())
    assert all(t.description for t in catalog.table_tests())


def test_every_chart_and_source_kind_is_described_where_it_is_declared() -> None:
    """A chart's title and description are its YAML entry's (the loader refuses an empty one); a source
    kind's reference is its reader module's docstring, and each option it takes says what it does."""
    from dashboards.charts import CHARTS
    from pipelines.readers import KINDS, reader_for

    assert all(chart.title and chart.description and chart.empty for chart in CHARTS.values())
    for kind in KINDS:
        reader = reader_for(kind)
        assert (reader.__doc__ or "").strip(), f"pipelines/readers/{kind}.py has no docstring"
        for option, (_, _, description) in getattr(reader, "OPTIONS", {}).items():
            assert description.strip(), f"{kind}: option {option} says nothing"


def test_chart_colours_are_the_seed_values() -> None:
    """sql/seeds/colors.csv colours exactly the values of the seeds (plus each chart's folded row), one
    distinct #rrggbb per value, and the charts take their colours from it."""
    from dashboards import palette

    rows = schema.seed_rows("colors")
    assert all(re.fullmatch(r"#[0-9a-f]{6}", r["color"]) for r in rows), rows
    by_dimension: dict[str, list[str]] = {}
    for r in rows:
        by_dimension.setdefault(r["dimension"], []).append(r["value"])
    roles = {r["agent_role"] for r in schema.seed_rows("operation_types") if r["kind"] == "agent"}
    assert set(by_dimension["system"]) == set(schema.KNOWN_SYSTEMS)
    assert set(by_dimension["error_type"]) == {*schema.ERROR_TYPES, "unlabelled"}
    assert set(by_dimension["stage"]) == {r["stage"] for r in schema.seed_rows("error_types")} | {schema.UNKNOWN}
    assert set(by_dimension["agent_role"]) == roles | {"other"}
    assert set(by_dimension["common_category"]) == {
        r["common_category"] for r in schema.seed_rows("failure_categories")} | {"unmapped", "unlabelled"}
    assert set(by_dimension) == {"system", "error_type", "stage", "agent_role", "common_category"}
    for values in by_dimension.values():
        assert len(values) == len(set(values))
    assert len({palette.SYSTEM_COLORS[s] for s in schema.KNOWN_SYSTEMS}) == len(schema.KNOWN_SYSTEMS)
    assert list(palette.SYSTEM_COLORS) == by_dimension["system"]
    assert palette.ERROR_COLORS["ExtractionError"] == next(
        r["color"] for r in rows if r["dimension"] == "error_type" and r["value"] == "ExtractionError")


# ---------------------------------------------------------------------------------------------
# Every count and list of names the docs state is the code's (issue 32: "Docs true and checked").

NUMBER_WORDS = {word: n for n, word in enumerate((
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"))}
_NUMBER = r"\d+|" + "|".join(NUMBER_WORDS)
# "nine tables", "43 checks", "17 Iceberg tables", "Ten table files per partition", "two kinds of graph"; a
# singular noun ("one view per table") is an article, not a count. A count followed by "then" is a past
# measurement (the figures of a benchmark), stated as such, and not held to today's code.
STATED_COUNT = re.compile(
    rf"(?i)(?<![\w.-])(?P<n>{_NUMBER})\s+(?P<noun>(?:(?:canonical|graph|partition|hand-written|SQL|asset|Iceberg|"
    r"declared|seed|source)\s+)?(?:tables|table files|marts|checks|charts|seeds|macros|kinds of graph|kinds))"
    r"\b(?=(?P<after>[^.\n]{0,40}))")
# "per check (43 today)"
STATED_TODAY = re.compile(r"(?i)\b(?P<noun>table|mart|check|chart|seed|macro)s?\b[^()\n]{0,20}\((?P<n>\d+) today\)")
COUNTED_DOCS = ["README.md", *sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md"))]


def stated_number(word: str) -> int:
    return int(word) if word.isdigit() else NUMBER_WORDS[word.lower()]


def code_counts() -> dict[str, int]:
    """What each counted noun of the docs is, computed from the code."""
    from dashboards.charts import CHARTS
    from pipelines.analytics import catalog
    from pipelines.readers import KINDS
    from pipelines.validation import checks

    all_checks = checks.all_checks()
    return {
        "tables": len(schema.TABLES),
        "table files": len(schema.TABLES),  # per partition: a generation holds every table
        "iceberg tables": len(schema.TABLES) + len(catalog.marts()),
        "marts": len(catalog.marts()),
        "checks": len(all_checks),
        "asset checks": len(checks.asset_checks(all_checks)),  # of the tables: one per table and severity
        "sql checks": sum(c.kind == "sql" for c in all_checks),
        "charts": len(CHARTS),
        "seeds": len(catalog.seeds()),
        "macros": len(catalog.macros()),
        "source kinds": len(KINDS),  # the label and prediction kinds among them
        "kinds of graph": len({r["graph_kind"] for r in schema.seed_rows("systems")}),
    }


# A doc that counts a part of the whole: what it counts there.
def scoped_counts() -> dict[tuple[str, str], int]:
    from dashboards.charts import CHARTS
    from pipelines.analytics import catalog

    return {
        ("docs/ATTRIBUTION.md", "charts"): sum(name.startswith("attribution_") for name in CHARTS),
        ("docs/ATTRIBUTION.md", "marts"): sum(name.startswith("attribution_") for name in catalog.marts()),
    }


def stated_counts(text: str) -> list[tuple[str, int, str]]:
    """(noun, count, the words as written) of every count ``text`` states and holds to today's code."""
    found = []
    for match in STATED_COUNT.finditer(text):
        after = match.group("after")
        if re.match(r"\s*(then\b|,? at the time)", after):
            continue
        noun = match.group("noun").lower()
        n = stated_number(match.group("n"))
        per = re.match(r"\s+in (\d+) partitions", after)
        if noun == "table files" and per:  # "54 table files in 6 partitions"
            n //= int(per.group(1)) if n % int(per.group(1)) == 0 else -1
        found.append((noun, n, match.group(0)))
    for match in STATED_TODAY.finditer(text):
        found.append((match.group("noun").lower() + "s", int(match.group("n")), match.group(0)))
    return found


def test_stated_counts_recognise_words_digits_and_past_measurements() -> None:
    text = ("a generation holds its nine tables; 43 checks; 17 Iceberg tables then; Ten table files per partition; "
            "54 table files in 6 partitions; one view per table; two kinds of graph; one `AssetCheckSpec` per "
            "check (43 today)")
    assert stated_counts(text) == [("tables", 9, "nine tables"), ("checks", 43, "43 checks"),
                                   ("table files", 10, "Ten table files"), ("table files", 9, "54 table files"),
                                   ("kinds of graph", 2, "two kinds of graph"), ("checks", 43, "check (43 today)")]


def wrong_counts(name: str, text: str) -> list[str]:
    counts, scoped = code_counts(), scoped_counts()
    wrong = []
    for noun, n, written in stated_counts(text):
        expected = scoped.get((name, noun), counts.get(noun))
        assert expected is not None, f"{name}: {written!r}: no count of {noun!r} known to the test"
        if n != expected:
            wrong.append(f"{name}: {written!r} says {n}, the code has {expected}")
    return wrong


def test_every_count_the_docs_state_is_the_codes() -> None:
    assert [w for name in COUNTED_DOCS for w in wrong_counts(name, doc(name))] == []
    # ... and the check would see a wrong one, whether in words or digits.
    n_tables = len(schema.TABLES)
    assert wrong_counts("docs/BUILDS.md", "holding its seven tables, and 8 marts then") == [
        f"docs/BUILDS.md: 'seven tables' says 7, the code has {n_tables}"]
    assert wrong_counts("docs/X.md", f"{n_tables} tables and {n_tables * 6 + 1} table files in 6 partitions") != []
    assert wrong_counts("docs/ATTRIBUTION.md", "three charts drawn from the marts") == []
    assert wrong_counts("docs/SCALE.md", "three charts") != []


def backticked(text: str) -> list[str]:
    return re.findall(r"`([\w-]+)`", text)


def section(text: str, start: str, end: str = "\n\n") -> str:
    assert start in text, start
    return text.split(start, 1)[1].split(end, 1)[0]


def test_every_list_of_names_the_docs_give_is_the_codes() -> None:
    from dashboards.charts import CHARTS
    from pipelines.analytics import catalog
    from pipelines.readers import GRAPH_KINDS, KINDS, LABEL_KINDS, PREDICTION_KINDS

    tables = list(schema.TABLES)
    # Tables, in the Python API's and the Iceberg publication's lists.
    assert backticked(section(doc("docs/PYTHON.md"), "a table (", ")")) == tables
    iceberg = section(doc("docs/SCALE.md"), "| the tables |", "\n")
    assert re.findall(r"`tracehouse\.(\w+)`", iceberg.split("and one per mart")[0]) == tables
    # Seeds, where the docs list them.
    seeds = set(catalog.seeds())
    assert set(re.findall(r"\w+", section(doc("docs/MARTS.md"), "_seeds.yml", "(read"))) == seeds
    assert set(backticked(section(doc("docs/TABLES.md"), "seed tables from `sql/seeds/` (", ")"))) == seeds
    # Source kinds (docs/SOURCES.md's table) and charts (docs/DASHBOARD.md's): each a row names exists,
    # none twice; the tables need not hold every one (the declarations are the reference).
    kinds = dict(re.findall(r"^\| `(\w+)` \| (\w+:)?", section(doc("docs/SOURCES.md"), "| kind | give it |", "\n\n"),
                            re.M))
    assert kinds and set(kinds) <= set(KINDS), set(kinds) - set(KINDS)
    # ... each in its tier: what a label or prediction source is given says so first.
    tiers = dict.fromkeys(GRAPH_KINDS, "") | dict.fromkeys(LABEL_KINDS, "labels:") | dict.fromkeys(
        PREDICTION_KINDS, "predictions:")
    assert {kind: given for kind, given in kinds.items()} == {kind: tiers[kind] for kind in kinds}
    rows = re.findall(r"^\| `(\w+)` \| ([^|]*) \|", section(doc("docs/DASHBOARD.md"), "| chart | from | shows |",
                                                           "\n\n"), re.M)
    charts_table = [name for name, _ in rows]
    assert charts_table and len(set(charts_table)) == len(charts_table)
    assert charts_table == [name for name in CHARTS if name in charts_table]  # in the page's order
    read = {item.split()[0] for _, source in rows for item in source.split(",")}
    assert read <= {*catalog.marts(), *schema.TABLES}, read - {*catalog.marts(), *schema.TABLES}
    macro_docs = doc("docs/MARTS.md") + doc("docs/ATTRIBUTION.md")
    assert [m for m in catalog.macros() if f"`{m}(" not in macro_docs] == []


# A query of the docs: `tracehouse sql "..."` (or '...'); the relations it reads: DuckDB's parse tree of it,
# or, for a statement DuckDB does not serialize (PIVOT), the names after FROM and JOIN. A source's kind in an
# example: `--source [NAME:]KIND=PATH` (not a placeholder's `a=...`), or `kind = "..."` in [[sources]].
_DOC_QUERY = re.compile(r"""tracehouse sql\s+(?:"([^"]*)"|'([^']*)')""")
_DOC_SOURCE_KIND = re.compile(r"--source (?:[\w-]+:)?(\w+)=(?!\.\.\.)|^\s*kind = \"(\w+)\"", re.M)


def relations_read(query: str) -> set[str]:
    from pipelines.analytics import catalog

    try:
        found, _ = catalog.parse_sql(query)
    except catalog.CatalogError:
        found = set(re.findall(r"(?i)\b(?:from|join)\s+(\w+)\b(?!\s*\()", query))
    return found - set(re.findall(r"(?i)\b(\w+)\s+as\s*\(", query))  # its own CTEs


def test_every_mart_table_and_kind_a_doc_names_in_an_example_exists() -> None:
    """The relations each `tracehouse sql` query of the docs reads are tables, views, marts or seeds,
    and each source kind an example gives (`--source NAME:KIND=PATH`, `kind = "..."`) is a kind: a mart or
    kind renamed or removed fails here, even in a doc that names it only in an example."""
    from pipelines.analytics import catalog
    from pipelines.readers import KINDS

    known = {*schema.TABLES, *catalog.views(), *catalog.marts(), *catalog.seeds()}
    unknown, queries, kinds = [], 0, 0
    for name in COUNTED_DOCS:
        for match in _DOC_QUERY.finditer(doc(name)):
            query = match.group(1) or match.group(2)
            if query.lstrip().startswith("."):
                continue
            queries += 1
            unknown += [f"{name}: {relation} in {query!r}" for relation in sorted(relations_read(query) - known)]
        for match in _DOC_SOURCE_KIND.finditer(doc(name)):
            table = re.findall(r"^\s*(\[[^\]\n]*\]+)", doc(name)[:match.start()], re.M)
            if match.group(2) and table[-1:] != ["[[sources]]"]:
                continue  # a kind of something else: `[executor] kind = "dask"`
            kinds += 1
            kind = match.group(1) or match.group(2)
            if kind not in KINDS:
                unknown.append(f"{name}: source kind {kind!r} in {match.group(0).strip()!r}")
    assert queries > 10 and kinds > 5 and unknown == []
    assert relations_read("with x as (select 1) select * from x join failure_ratez using (a)") == {"failure_ratez"}
    assert relations_read("pivot (select * from failure_ratez) on a using sum(n)") == {"failure_ratez"}


def test_the_documented_checks_are_the_checks() -> None:
    """docs/VALIDATION.md's table of checks names exactly the (table, check) pairs of the registry."""
    from pipelines.validation import checks

    tables = list(schema.TABLES)
    documented = set()
    for line in section(doc("docs/VALIDATION.md"), "| table | check | severity |", "\n\n").splitlines()[2:]:
        where, names = line.split("|")[1:3]
        where = where.strip()
        if where.startswith("every table"):
            but = where.removeprefix("every table").removeprefix(" but ")
            on = [t for t in tables if t not in re.findall(r"\w+", but)]
        else:
            on = [t.strip() for t in where.split(",")]
        documented |= {(t, name) for t in on for name in backticked(names)}
    assert documented == {(c.asset, c.name) for c in checks.all_checks()}


def exit_statuses(paragraph: str) -> set[int]:
    return {int(code) for code in re.findall(r"(?:^|[:,])\s*(\d+)\s+[a-z]", paragraph)}


def test_the_readme_exit_statuses_are_the_clis() -> None:
    readme = section(doc("README.md"), "Exit status:", " Every command")
    cli = section(make_parser().format_help(), "exit status:", "\n")
    assert exit_statuses(readme) == exit_statuses(cli) == {0, 1, 2, 3, 4, 130}


def test_the_ingest_error_kinds_the_docs_list_are_the_seed() -> None:
    kinds = [r["kind"] for r in schema.seed_rows("ingest_error_kinds")]
    table = section(doc("docs/VALIDATION.md"), "| defect | kind | position | readers |", "\n\n")
    documented = [backticked(line.split("|")[2])[0] for line in table.splitlines()[2:]]
    assert sorted(documented) == sorted(kinds) and len(documented) == len(kinds)
    column = section(doc("docs/TABLES.md"), "| kind | string |", "(see")
    assert sorted(re.findall(r"\w+", column)) == sorted(kinds)


def test_every_low_level_device_is_listed_in_benchmarks() -> None:
    """The devices that reach under Python (ctypes over the CPython C API and glibc) live in one
    module, pipelines/native.py, and each is named in BENCHMARKS.md's "Low-level devices still in the
    code", where its figure is; Arrow's allocator choice (a documented Arrow setting) is listed there
    too, with its own figure."""
    devices = doc("BENCHMARKS.md").split("**Low-level devices still in the code**", 1)[1].split("\n\n")[1]
    under = sorted(str(path.relative_to(REPO)) for path in (REPO / "pipelines").rglob("*.py")
                   if re.search(r"^\s*(import|from) ctypes|malloc_trim|mallopt|pythonapi", path.read_text(), re.M))
    assert under == ["pipelines/native.py"]
    for device in ("utf8_view", "ARROW_DEFAULT_MEMORY_POOL"):
        assert f"`{device}" in devices, device
    assert "`pipelines/native.py`" in devices
