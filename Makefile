# Two commands set everything up on a fresh machine:
#   make run   builds the warehouse from the embedded default corpus
#   make test  runs the test suite
# Both create .venv (Python 3.12, pinned dependencies) when it is missing. `make run` installs only
# what the main job needs (`pip install -e .`); `make test` adds the test tools and every extra
# (`.[dev]`: pytest, pyspark, moto, selenium, dask, obstore, pyiceberg, ...). One stamp per set, so
# each installs again when pyproject.toml changes.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check

.PHONY: run test test-fast lint bench bench-scale bench-collect browser clean sample-archive

CHECK_PYTHON := $(BIN)/python -c 'import sys; assert sys.version_info[:2] == (3, 12), f"need Python 3.12, got {sys.version}"'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	@$(CHECK_PYTHON)
	$(PIP) --upgrade pip

$(RUN_STAMP): pyproject.toml | $(BIN)/python
	@$(CHECK_PYTHON)
	$(PIP) -e .
	@touch $(RUN_STAMP)

$(DEV_STAMP): pyproject.toml | $(BIN)/python
	@$(CHECK_PYTHON)
	$(PIP) -e '.[dev]'
	@touch $(DEV_STAMP)

run: $(RUN_STAMP)
	$(BIN)/tracehouse build

# The dashboard tests drive Debian's headless Chromium, and render Chinese trace text with a CJK
# font (WenQuanYi Zen Hei); install them when missing (root, Debian).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null && fc-list :lang=zh | grep -q . || \
	  { (apt-get update -qq && apt-get install -y -qq chromium chromium-driver fonts-wqy-zenhei >/dev/null) || \
	    echo "warning: could not install chromium and a CJK font; browser tests will be skipped"; }

# Every test, on two pytest-xdist workers (a test file's tests on one worker): much of the slow tier
# waits on servers, installs and browsers, which a second worker overlaps with the builds.
test: $(DEV_STAMP) browser
	$(BIN)/ruff check pipelines dashboards tests bench
	GX_ANALYTICS_ENABLED=false $(BIN)/python -m pytest -q -n 2 --dist loadfile

# The fast tier: every test that needs no server, browser, JVM, cluster or second environment (the
# others are marked slow in tests/conftest.py and run in `make test` and CI), on two pytest-xdist
# workers, a test file's tests on one worker (--dist loadfile: module-scoped warehouses are built once).
# CPU-bound, about 30 minutes on 2 cores (BENCHMARKS.md, "The test suite's time"), mostly real builds
# (tests/conftest.py loads Great Expectations once in each worker for the in-process ones).
test-fast: $(DEV_STAMP)
	$(BIN)/ruff check pipelines dashboards tests bench
	GX_ANALYTICS_ENABLED=false $(BIN)/python -m pytest -q -m "not slow" -n 2 --dist loadfile

lint: $(DEV_STAMP)
	$(BIN)/ruff check pipelines dashboards tests bench

bench: $(DEV_STAMP)
	$(BIN)/python bench/run.py

# Object storage (moto's S3 server, started and stopped by the script) against local disk: the
# "Scale-out: object storage" section of BENCHMARKS.md, raw numbers in bench/scale-results.json.
bench-scale: $(DEV_STAMP)
	$(BIN)/python bench/scale.py

# tracehouse collect: acknowledged spans/s with 1, 4 and 8 clients, and a build over what it landed: the
# "Collecting traces" section of BENCHMARKS.md, raw numbers in bench/collect-results.json.
bench-collect: $(DEV_STAMP)
	$(BIN)/python bench/collect.py

clean:
	rm -rf warehouse .pytest_cache .venv-compat

# The default corpus shipped with the code (pipelines/sample/archive.py); remake it after changing
# the generator (tests/test_sample_corpus.py says when).
sample-archive: $(RUN_STAMP)
	$(BIN)/python -m pipelines.sample.archive
