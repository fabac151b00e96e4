# Two commands: `make demo` and `make test`. Both create .venv and install what they need.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test install bench clean

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "graphmem needs $(PYTHON) on PATH (or run: make PYTHON=python3 ...)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	@touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	GRAPHITI_TELEMETRY_ENABLED=false $(PY) -m graphmem.demo

test: $(STAMP)
	GRAPHITI_TELEMETRY_ENABLED=false $(PY) -m pytest -q

bench: $(STAMP)
	for b in bench/*.py; do GRAPHITI_TELEMETRY_ENABLED=false $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
