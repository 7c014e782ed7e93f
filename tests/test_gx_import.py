"""Great Expectations imports in any process, with no stand-ins: the GX worker is a spawned child
whose ``__main__`` may have no file, and with pyspark installed (the test tools' environment) GX
imports ``pyspark.sql.connect``, whose dependency check ends such a process with status 0 when one
of the packages it checks for (googleapis-common-protos, grpcio-status, zstandard) is missing."""

from __future__ import annotations

import os
import subprocess
import sys


def test_great_expectations_imports_in_a_process_without_a_main_file() -> None:
    script = "import great_expectations as gx\nprint('imported great_expectations', gx.__version__)"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "GX_ANALYTICS_ENABLED": "false"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("imported great_expectations 1."), (done.stdout, done.stderr[-2000:])
