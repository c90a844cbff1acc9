# Two commands do all the set-up on a fresh machine:
#   make test   create .venv if needed, install groute with its test extras, run the tests
#   make demo   run PBF and every registered algorithm on the shipped graph on whatever devices
#               are there
# The venv sees system site-packages so a machine's own CuPy (GPU images) is used as is; its
# setuptools is the one pyproject.toml builds with, so the tests can build a wheel offline.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.groute-installed

.PHONY: test demo venv clean

venv: $(STAMP)

$(BIN)/python:
	$(PYTHON) -m venv --system-site-packages $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip 'setuptools>=77'
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q

demo: $(STAMP)
	$(BIN)/python -m groute demo

clean:
	rm -rf $(VENV) build *.egg-info
