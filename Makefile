# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

FUZZ_SECONDS ?= 300

.PHONY: install demo test bench fuzz coverage clean

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

# The three campaigns all run even when one finds something; each one's exit status is reported at the end,
# and the target fails if any of them failed.
fuzz: $(STAMP)
	@fe=0; diff=0; adv=0; \
	$(PY) tests/fuzz/frontend_campaign.py --seconds $(FUZZ_SECONDS) || fe=$$?; \
	$(PY) bench/fuzz.py --seconds $(FUZZ_SECONDS) || diff=$$?; \
	$(PY) tests/fuzz/adversarial_campaign.py --seconds $(FUZZ_SECONDS) || adv=$$?; \
	echo "make fuzz: front-end campaign exit $$fe, differential campaign exit $$diff, adversarial campaign exit $$adv"; \
	test $$fe -eq 0 && test $$diff -eq 0 && test $$adv -eq 0

# Line coverage of compiler/ and passes/ reached by the test suite (slower than `make test`).
coverage: $(STAMP)
	$(PY) -m coverage run --include='compiler/*,passes/*' -m pytest -q tests
	$(PY) -m coverage report --sort=cover

clean:
	rm -rf $(VENV) build *.egg-info
