"""The devices kept below Python, each against the same build without it (A/B): what they pay on a
whole build, the figures BENCHMARKS.md ("Low-level devices still in the code") quotes.

    .venv/bin/python bench/devices.py [--pairs 3] [--only allocator,utf8_view] [--corpus DIR]

allocator    Arrow's system allocator (``ARROW_DEFAULT_MEMORY_POOL=system``, pipelines/__init__.py)
             against Arrow's default, mimalloc (the variable set to ``mimalloc``).
utf8_view    long node values handed to Arrow without a copy (pipelines.native.utf8_view, used by
             readers/base.large_string_array) against a copy of this commit in which no value is
             long enough to be shared (made with ``git worktree`` in a temporary folder, removed at
             the end), so every value is converted by pyarrow.

glibc's ``malloc_trim``, measured the same way, is not in the code: its figures are in
bench/devices-results.json ("malloc_trim").

Each round runs a fresh ``tracehouse build`` of the large benchmark corpus (bench/run.py's, 400
graphs / 1.1 GB, made by ``make bench``) once per variant, in alternating order, as new processes
measured by bench/run.py's run_process (wall seconds, peak RSS of the build process and of its
process tree, GX worker included). Writes bench/devices-results.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from run import PYTHON, REPO, build_command, run_process  # noqa: E402

EXPERIMENTS = ("allocator", "utf8_view")
NEVER_SHARED = "SHARED_VALUE_CHARS = 1 << 62  # bench/devices.py: no value is shared\n"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()


def without_sharing(folder: Path) -> Path:
    """A worktree of HEAD in which no node value is long enough to be shared with Arrow."""
    _git("worktree", "add", "--detach", str(folder), "HEAD")
    base = folder / "pipelines" / "readers" / "base.py"
    lines = base.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("SHARED_VALUE_CHARS = "))
    base.write_text("".join(lines[:at] + [NEVER_SHARED] + lines[at + 1:]))
    # a file, not `python -c`: GX under `python -c` with pyspark installed exits
    (folder / "run_tracehouse.py").write_text(
        "import sys\nfrom pipelines.interfaces.cli import main\nsys.exit(main())\n")
    return folder


def in_copy(command: list[str], copy: Path) -> list[str]:
    """The same ``tracehouse`` command run from the code in ``copy`` (its folder first on the path)."""
    return [PYTHON, str(copy / "run_tracehouse.py"), *command[1:]]


def measure(pairs: int, corpus: Path, out: Path, variants: dict[str, tuple[dict[str, str], Path | None]]) -> dict:
    """``pairs`` rounds of one fresh build per variant (its environment, and the copy of the code it
    runs from, None for this one), alternating the order."""
    runs: dict[str, list[dict]] = {name: [] for name in variants}
    names = list(variants)
    for round_no in range(pairs):
        for name in names if round_no % 2 == 0 else names[::-1]:
            env, copy = variants[name]
            warehouse = out / f"warehouse-device-{name}"
            shutil.rmtree(warehouse, ignore_errors=True)
            command = build_command(warehouse, corpus)
            record = run_process(in_copy(command, copy) if copy else command, cwd=out, env=env)
            shutil.rmtree(warehouse, ignore_errors=True)
            runs[name].append({"wall": record["wall"], "peak_rss_mb": record["peak_rss_mb"],
                               "tree_peak_mb": record["tree_peak_mb"], "exit": record["exit"]})
            print(f"  round {round_no + 1}: {name:12s} {record['wall']:6.2f} s, process peak "
                  f"{record['peak_rss_mb']:.0f} MB, tree peak {record['tree_peak_mb']:.0f} MB", flush=True)
    keys = ("wall", "peak_rss_mb", "tree_peak_mb")
    return {"median": {name: {key: statistics.median(r[key] for r in records) for key in keys}
                       for name, records in runs.items()}, "runs": runs}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3, help="rounds of one build per variant (3)")
    parser.add_argument("--only", default=",".join(EXPERIMENTS), help=f"experiments ({', '.join(EXPERIMENTS)})")
    parser.add_argument("--corpus", type=Path, default=BENCH / "out" / "corpus", help="the corpus to build")
    parser.add_argument("--out", type=Path, default=BENCH / "out", help="where the warehouses go")
    args = parser.parse_args()
    args.corpus, args.out = args.corpus.resolve(), args.out.resolve()  # the builds run in --out
    if not args.corpus.is_dir():
        parser.error(f"{args.corpus} does not exist: `make bench` makes it")
    results = {"date": time.strftime("%Y-%m-%d %H:%M"), "code": _git("rev-parse", "--short", "HEAD"),
               "machine": platform.node(), "corpus": str(args.corpus), "pairs": args.pairs, "experiments": {}}
    only = args.only.split(",")
    if "allocator" in only:
        print("allocator", flush=True)
        results["experiments"]["allocator"] = measure(args.pairs, args.corpus, args.out, {
            "system": ({"ARROW_DEFAULT_MEMORY_POOL": "system"}, None),
            "mimalloc": ({"ARROW_DEFAULT_MEMORY_POOL": "mimalloc"}, None)})
    if "utf8_view" in only:
        print("utf8_view", flush=True)
        with tempfile.TemporaryDirectory(prefix="tracehouse-unshared-") as tmp:
            copy = without_sharing(Path(tmp) / "code")
            try:
                results["experiments"]["utf8_view"] = measure(args.pairs, args.corpus, args.out, {
                    "shared": ({}, None), "copied": ({}, copy)})
            finally:
                _git("worktree", "remove", "--force", str(copy))
    path = BENCH / "devices-results.json"
    kept = json.loads(path.read_text()).get("experiments", {}) if path.is_file() else {}
    for experiment in results["experiments"].values():
        experiment.update(date=results["date"], code=results["code"])
    for name, experiment in kept.items():  # an experiment not run now keeps its last figures (and date, code)
        results["experiments"].setdefault(name, experiment)
    path.write_text(json.dumps(results, indent=1))
    for name, experiment in results["experiments"].items():
        for variant, figures in experiment["median"].items():
            print(f"{name:12s} {variant:10s} median {figures['wall']:.2f} s, process peak "
                  f"{figures['peak_rss_mb']:.0f} MB, tree peak {figures['tree_peak_mb']:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
