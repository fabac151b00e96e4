# Two commands: `make demo` and `make test`. Both create .venv and install what they need.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast slow-list lint install bench clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { echo "graphmem needs Python 3.11 or newer (found: $(PYTHON)); run: make PYTHON=/path/to/python3.11 ..."; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	GRAPHITI_TELEMETRY_ENABLED=false $(PY) -m graphmem.demo

# ruff (style, bugs) and mypy (types) on src/ and providers/; the import contracts run in the tests
lint: $(STAMP)
	$(VENV)/bin/ruff check src providers tests bench
	$(VENV)/bin/mypy

# the tests in one process, or with WORKERS=2 in two (pytest-xdist, each test file whole in one
# of them: about 8 minutes instead of 12 here, but a loaded machine times some servers out)
WORKERS ?= 0
XDIST = $(if $(filter 0,$(WORKERS)),,-n $(WORKERS) --dist loadfile)

# The tests marked serial change what every process shares: they run alone, first.
test: lint
	GRAPHITI_TELEMETRY_ENABLED=false $(PY) -m pytest -q -m serial
	GRAPHITI_TELEMETRY_ENABLED=false $(PY) -m pytest -q -m "not serial" $(XDIST)

# the inner loop: the tests not marked slow (the serial ones are slow too)
test-fast: $(STAMP)
	GRAPHITI_TELEMETRY_ENABLED=false $(PY) -m pytest -q -m "not slow and not serial" $(XDIST)

# re-measure which tests are slow (tests/slow_tests.txt) after adding or speeding up tests
slow-list: $(STAMP)
	GRAPHITI_TELEMETRY_ENABLED=false $(PY) -m pytest -q -p no:cacheprovider --junitxml=.slow-report.xml; \
	  $(PY) tests/slow_list.py .slow-report.xml; rm -f .slow-report.xml

bench: $(STAMP)
	for b in bench/[!_]*.py; do GRAPHITI_TELEMETRY_ENABLED=false $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
