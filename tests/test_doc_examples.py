"""Every fenced code example of README.md and docs/*.md, run as written against a warehouse built once
from the default corpus (what `make run` builds), in a folder of its own where `warehouse/` is that
warehouse and `W` a link to it (the docs' name for "your warehouse").

- ```sh: each command runs for real (`tracehouse` is the installed console script), in document
  order, and must exit 0 without a traceback; a command that cannot run here matches a rule of
  :data:`NOT_RUN`, which says why, and is still checked: its subcommand exists and every flag it
  uses is in that subcommand's --help (make targets, files and links it names exist). It is then
  reported as skipped with that reason, never dropped silently.
- ```python: run in a subprocess in that folder; a block that cannot run here is in
  :data:`PYTHON_NOT_RUN` with the reason, and must still compile.
- ```toml: read as tracehouse.toml (its keys known); ```yaml: parsed. Blocks without a language are
  listings of files, not examples.

Placeholders of the docs (`graph-…`, `op-77ee`, `ANNOTATION_ID`, `--build 41`, ...) become real ids
of the built warehouse through :func:`substitutions`; a desktop browser (`--open`) is `true`
(``BROWSER=true``: Python's webbrowser runs it and reports success).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import REPO, build_warehouse, query

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^(?P<indent> *)```(?P<language>\w*)\n(?P<text>.*?)^(?P=indent)```", re.S | re.M)


@dataclass(frozen=True)
class Example:
    """One fenced block, or one command of an ```sh block."""

    doc: str
    line: int
    language: str
    text: str

    @property
    def name(self) -> str:
        return f"{self.doc}:{self.line}"


def blocks() -> list[Example]:
    found = []
    for path in DOCS:
        text = path.read_text()
        for match in FENCE.finditer(text):
            indent = len(match["indent"])
            body = "".join(line[indent:] for line in match["text"].splitlines(keepends=True))
            found.append(Example(path.relative_to(REPO).as_posix(), text.count("\n", 0, match.start()) + 1,
                                 match["language"], body))
    return found


def commands(block: Example) -> list[Example]:
    """The commands of an ```sh block: a line, with the lines its backslashes or open quotes carry on
    to; lines that are only a comment are none."""
    found, pending, start = [], "", 0
    for offset, line in enumerate(block.text.splitlines()):
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if not pending:
            start = block.line + 1 + offset
        pending += line + "\n"
        if line.endswith("\\"):
            continue
        try:
            shlex.split(pending, comments=True)
        except ValueError:  # a quoted string goes on to the next line
            continue
        found.append(Example(block.doc, start, "sh", pending))
        pending = ""
    assert not pending, f"{block.name}: an unfinished command: {pending!r}"
    return found


def argv(command: Example) -> list[str]:
    return shlex.split(command.text.replace("\\\n", " "), comments=True)  # a backslash-newline joins lines


# -- what does not run here, and why --------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    reason: str
    matches: Callable[[list[str]], bool]


def _sub(words: list[str]) -> str:
    return words[1] if words[0] == "tracehouse" and len(words) > 1 else ""


def _given_source(words: list[str]) -> bool:
    return _sub(words) == "build" and ("--source" in words or "--remove-source" in words)


NOT_RUN = [
    Rule("make: `make run` builds the repository's own warehouse/ (this test's fixture builds the same "
         "default corpus) and `make test` is the whole suite", lambda w: w[0] == "make"),
    Rule("sets up the user's shell (checked: the console script it names is installed)", lambda w: w[0] == "alias"),
    Rule("runs other test files (checked: they exist)", lambda w: w[:3] == [".venv/bin/python", "-m", "pytest"]),
    Rule("needs object storage (an S3 server and its credentials; tests/test_object_storage.py)",
         lambda w: w[0] == "export" or any("s3://" in word for word in w)),
    Rule("a long-lived server or watcher (ui, watch, collect; tests/test_ui_runs.py, test_collect.py)",
         lambda w: _sub(w) in ("ui", "watch", "collect")),
    Rule("downloads from the Hugging Face Hub (no network here)", lambda w: _sub(w) == "fetch"),
    Rule("needs a Dask cluster (tests/test_executor.py)", lambda w: _sub(w) == "build" and "--executor" in w),
    Rule("names data folders of a user's machine (--source; --remove-source drops the one added so)",
         _given_source),
    Rule("PNGs of every chart and picture (the docs say slow): `--pictures svg` runs the same steps here, and "
         "tests/test_pictures.py converts PNGs", lambda w: _sub(w) == "build" and "png" in w),
    Rule("turns on Apache Iceberg publication for every later build of the warehouse "
         "(tests/test_iceberg.py runs it)", lambda w: _sub(w) == "build" and "--iceberg" in w),
]

PYTHON_NOT_RUN = {
    "docs/DASHBOARD.md": "the template of a new chart's function (its chart is declared nowhere)",
    "docs/SCALE.md": "needs the Iceberg catalog of a warehouse built with --iceberg, a PostgreSQL server or "
                     "Spark with packages from Maven (tests/test_iceberg.py and test_spark.py run these)",
}
# What a block that does not run is checked against: the names it uses are defined by the blocks of its
# doc before it and by itself (a doc's blocks are one session), or by these imports, which must work.
PYTHON_CONTEXT = {"docs/DASHBOARD.md": "import altair as alt\n\n"  # the module the template goes in
                                        "from dashboards.charts import data, focus_opacity, pick\n"
                                        "from dashboards.registry import chart\n"}


def not_run(words: list[str]) -> Rule | None:
    return next((rule for rule in NOT_RUN if rule.matches(words)), None)


# -- the warehouse and the placeholders ---------------------------------------------------------------------


@dataclass
class Place:
    folder: Path  # the working directory of every example: warehouse/ and W are in it
    replacements: list[tuple[str, str]]  # (as the docs write it, a real value), longest first
    tokens: dict[str, str]  # whole words replaced


def substitutions(warehouse: Path, scratch: Path) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The docs' placeholders and example ids, each mapped to a real one of ``warehouse``: a failure
    annotation `<graph>#a0` with a faulty operation, a prediction of its graph and a node upstream of
    that prediction; the build committed; folders a command writes to, under ``scratch``."""
    graph, op, annotation = query(warehouse, "select graph_id, faulty_op_id, annotation_id from annotations "
                                             "where faulty_op_id is not null and annotation_id = graph_id || '#a0' "
                                             "order by all limit 1")[0]
    prediction = query(warehouse, "select full_node_id from nodes where graph_id = ? and class_name = 'prediction' "
                                  "order by all limit 1", [graph])[0][0]
    upstream = query(warehouse, "select full_node_id from upstream(?, ?) order by hops desc, full_node_id limit 1",
                     [graph, prediction])[0][0]
    build = query(warehouse, "select build from tracehouse_build")[0][0]
    replacements = [
        ("whowhen:Hand-Crafted/1#a0", annotation), ("graph-1a2b#a0", annotation),
        ("prediction:locomo-1-q4@1", prediction), ("prediction:…@1", prediction), ("U1:D1:6@1", upstream),
        ("graph-1a2b", graph), ("graph-…", graph), ("op-77ee", op), ("op-…", op),
        ("/tmp/pictures", str(scratch / "pictures")),
    ]
    tokens = {"ANNOTATION_ID": annotation, "DIR": str(scratch / "sample"), "41": str(build)}
    return replacements, tokens


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Place:
    folder = tmp_path_factory.mktemp("docs")
    summary = build_warehouse(folder / "warehouse", [])  # no source: the default corpus, as `make run`
    assert summary.ok, summary
    (folder / "W").symlink_to("warehouse")
    replacements, tokens = substitutions(folder / "warehouse", folder / "scratch")
    return Place(folder, replacements, tokens)


def substituted(words: list[str], place: Place) -> list[str]:
    out = []
    for index, word in enumerate(words):
        if word in place.tokens and (word != "41" or words[index - 1] == "--build"):
            word = place.tokens[word]
        for written, real in place.replacements:
            word = word.replace(written, real)
        out.append(word)
    return out


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TRACEHOUSE_WAREHOUSE", "TRACEHOUSE_CONFIG")}
    return env | {"BROWSER": "true", "GX_ANALYTICS_ENABLED": "false", "PYTHONDONTWRITEBYTECODE": "1"}


def tracehouse() -> list[str]:
    script = Path(sys.executable).with_name("tracehouse")
    return [str(script)] if script.exists() else [sys.executable, "-m", "pipelines.interfaces.cli"]


# -- checks of what does not run -------------------------------------------------------------------------------

_helps: dict[str, str] = {}


def help_text(sub: str) -> str:
    if sub not in _helps:
        done = subprocess.run([*tracehouse(), *([sub] if sub else []), "--help"], capture_output=True, text=True,
                              timeout=120, env=environment() | {"COLUMNS": "200"}, cwd=REPO)
        assert done.returncode == 0, done.stderr
        _helps[sub] = done.stdout
    return _helps[sub]


def check_written_right(words: list[str], name: str) -> None:
    """What a command that does not run here can be checked for: it names what exists."""
    if words[0] == "tracehouse":
        sub = words[1]
        assert re.search(rf"^ +{re.escape(sub)}\s", help_text(""), re.M), f"{name}: no subcommand {sub}"
        for word in words[2:]:
            if word.startswith("-") and word not in ("-", "--"):
                flag = word.split("=", 1)[0]
                assert re.search(rf"(^|[\s,\[]){re.escape(flag)}\b", help_text(sub), re.M), \
                    f"{name}: tracehouse {sub} has no option {flag}"
    elif words[0] == "make":
        makefile = (REPO / "Makefile").read_text()
        for target in words[1:]:
            assert re.search(rf"^{re.escape(target)}:", makefile, re.M), f"{name}: no make target {target}"
    elif words[0] == "alias":
        _, _, target = words[1].partition("=")
        assert (REPO / target).exists() or Path(sys.executable).with_name(Path(target).name).exists(), name
    elif words[:3] == [".venv/bin/python", "-m", "pytest"]:
        for word in words[3:]:
            assert word.startswith("-") or (REPO / word).exists(), f"{name}: no {word}"
    elif words[0] == "export":
        assert all(re.fullmatch(r"AWS_[A-Z_]+=.*", word) for word in words[1:]), name
    else:
        pytest.fail(f"{name}: a command no rule knows: {words[0]}")


def check_names(block: Example) -> None:
    """Every name ``block`` uses is defined (ruff's F821 over its doc's Python blocks up to it)."""
    context = PYTHON_CONTEXT.get(block.doc, "")
    if context:
        imported = subprocess.run([sys.executable, "-c", context], cwd=REPO, capture_output=True, text=True,
                                  timeout=120, env=environment())
        assert imported.returncode == 0, imported.stderr
    session = context + "".join(b.text for b in OTHERS if b.doc == block.doc and b.language == "python"
                                and b.line <= block.line)
    ruff = Path(sys.executable).with_name("ruff")
    done = subprocess.run([str(ruff), "check", "--isolated", "--select", "F821", "--stdin-filename", "example.py",
                           "-"], input=session, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{block.name}: a name no block defines\n{done.stdout}"


# -- the examples ----------------------------------------------------------------------------------------------

SHELL = [command for block in blocks() if block.language == "sh" for command in commands(block)]
OTHERS = [block for block in blocks() if block.language not in ("sh", "")]
_ran: dict[tuple[str, ...], subprocess.CompletedProcess] = {}


def test_every_block_is_a_language_this_test_knows() -> None:
    assert {b.language for b in blocks()} <= {"sh", "python", "toml", "yaml", ""}
    assert len(SHELL) > 40 and any(b.doc == "README.md" and b.language == "python" for b in OTHERS)


@pytest.mark.parametrize("command", SHELL, ids=[f"{c.name} {argv(c)[0]} {' '.join(argv(c)[1:2])}" for c in SHELL])
def test_shell_example(command: Example, place: Place) -> None:
    words = argv(command)
    rule = not_run(words)
    if rule is not None:
        check_written_right(words, command.name)
        pytest.skip(f"not run: {rule.reason}")
    assert words[0] == "tracehouse", f"{command.name}: a command no rule knows: {command.text}"
    real = substituted(words, place)
    key = tuple(real)
    if key not in _ran:  # the same command in two docs runs once
        _ran[key] = subprocess.run([*tracehouse(), *real[1:]], cwd=place.folder, capture_output=True, text=True,
                                   timeout=600, env=environment())
    done = _ran[key]
    assert done.returncode == 0 and "Traceback" not in done.stderr, (
        f"{command.name}: `{shlex.join(real)}` exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    if real[1] == "sql" and "--write" not in real:  # a query: its result shows
        assert done.stdout.strip(), f"{command.name}: no output"


@pytest.mark.parametrize("block", OTHERS, ids=[f"{b.name} {b.language}" for b in OTHERS])
def test_other_example(block: Example, place: Place) -> None:
    if block.language == "yaml":
        assert yaml.safe_load(block.text) is not None
        return
    if block.language == "toml":
        from pipelines.config import check_keys, load_settings

        config = place.folder / "scratch" / "tracehouse.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(block.text)
        check_keys(config, tomllib.loads(block.text))
        load_settings(None, None, str(config), require_paths=False)
        return
    compile(block.text, block.name, "exec")
    if block.doc in PYTHON_NOT_RUN:
        check_names(block)
        pytest.skip(f"not run: {PYTHON_NOT_RUN[block.doc]}")
    done = subprocess.run([sys.executable, "-c", block.text], cwd=place.folder, capture_output=True, text=True,
                          timeout=600, env=environment())
    assert done.returncode == 0, f"{block.name}: exited {done.returncode}\n{done.stderr[-4000:]}"
