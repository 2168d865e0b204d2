# The README's two commands: `make lab` and `make test`. Both create .venv when missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: lab test bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[lab,test]'
	touch $(STAMP)

# JupyterLab refuses to start as root unless told; containers and lent machines run as root.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

lab: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=notebooks $(ROOT_FLAG)

test: $(STAMP)
	$(BIN)/nbstripout --verify notebooks/*.ipynb
	$(BIN)/python -m pytest -q tests
	$(BIN)/python -m pytest -q --nbmake --nbmake-timeout=300 notebooks

bench: $(STAMP)
	for f in benchmarks/*.py; do $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info
