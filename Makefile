# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

FUZZ_SECONDS ?= 300

.PHONY: install demo test bench fuzz clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev,repl]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) -m arrc.demo

test: $(STAMP)
	$(PY) -m pytest tests

bench: $(STAMP)
	$(PY) bench/run.py

fuzz: $(STAMP)
	$(PY) tests/fuzz/frontend_campaign.py --seconds $(FUZZ_SECONDS)
	$(PY) bench/fuzz.py --seconds $(FUZZ_SECONDS)

clean:
	rm -rf $(VENV) build *.egg-info
