"""Arrow's allocator choice, A/B: what the system allocator (``ARROW_DEFAULT_MEMORY_POOL=system``,
set by pipelines/__init__.py) pays on a whole build against Arrow's default, mimalloc.

    .venv/bin/python bench/allocator.py [--pairs 3] [--corpus bench/out/corpus]

Each round runs a fresh ``tracehouse build`` of the large benchmark corpus (bench/run.py's, 400
graphs / 1.1 GB, made by ``make bench``) once per allocator, in alternating order, as new processes
measured by bench/run.py's run_process (wall seconds, peak RSS of the build process and of its
process tree). Writes bench/allocator-results.json; BENCHMARKS.md ("Low-level devices still in the
code") quotes the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from run import REPO, build_command, run_process  # noqa: E402

POOLS = ("system", "mimalloc")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3, help="rounds of one build per allocator (3)")
    parser.add_argument("--corpus", type=Path, default=BENCH / "out" / "corpus", help="the corpus to build")
    parser.add_argument("--out", type=Path, default=BENCH / "out", help="where the warehouses go")
    args = parser.parse_args()
    if not args.corpus.is_dir():
        parser.error(f"{args.corpus} does not exist: `make bench` makes it")
    runs: dict[str, list[dict]] = {pool: [] for pool in POOLS}
    for round_no in range(args.pairs):
        for pool in POOLS if round_no % 2 == 0 else POOLS[::-1]:
            warehouse = args.out / f"warehouse-allocator-{pool}"
            shutil.rmtree(warehouse, ignore_errors=True)
            os.environ["ARROW_DEFAULT_MEMORY_POOL"] = pool
            record = run_process(build_command(warehouse, args.corpus), cwd=args.out)
            runs[pool].append({"wall": record["wall"], "peak_rss_mb": record["peak_rss_mb"],
                               "tree_peak_mb": record["tree_peak_mb"], "exit": record["exit"]})
            print(f"  round {round_no + 1}: {pool:8s} {record['wall']:6.2f} s, process peak "
                  f"{record['peak_rss_mb']:.0f} MB, tree peak {record['tree_peak_mb']:.0f} MB", flush=True)
    os.environ.pop("ARROW_DEFAULT_MEMORY_POOL", None)
    keys = ("wall", "peak_rss_mb", "tree_peak_mb")
    summary = {pool: {key: statistics.median(r[key] for r in records) for key in keys}
               for pool, records in runs.items()}
    git = ["git", "rev-parse", "--short", "HEAD"]
    code = subprocess.run(git, cwd=REPO, capture_output=True, text=True).stdout.strip()
    results = {"date": time.strftime("%Y-%m-%d %H:%M"), "code": code, "machine": platform.node(),
               "corpus": str(args.corpus), "pairs": args.pairs, "median": summary, "runs": runs}
    (BENCH / "allocator-results.json").write_text(json.dumps(results, indent=1))
    for pool, figures in summary.items():
        print(f"{pool:8s} median {figures['wall']:.2f} s, process peak {figures['peak_rss_mb']:.0f} MB, "
              f"tree peak {figures['tree_peak_mb']:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
