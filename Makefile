# The README's two commands: `make lab` and `make test`. Both create .venv when missing.
PY ?= python3
PORT ?= 8888
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: lab test bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[lab,test]'
	# Strip notebook outputs on `git add`, so saved outputs never reach a commit (only in a git checkout).
	if git rev-parse --git-dir >/dev/null 2>&1; then $(BIN)/nbstripout --install; fi
	touch $(STAMP)

# JupyterLab refuses to start as root unless told; containers and lent machines run as root.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

# Listens on 127.0.0.1 only (never all interfaces, whatever Jupyter's defaults) and keeps
# Jupyter's random token: open the URL with ?token=... that it prints. Another port: make lab PORT=8889.
lab: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=notebooks --ServerApp.ip=127.0.0.1 --ServerApp.port=$(PORT) $(ROOT_FLAG)

# The notebooks as git holds them (scripts/committed_notebooks.py): outputs JupyterLab autosaved
# into the working copies never reach a commit, so they never fail the run; a committed one does.
NB_CHECK := build/notebooks-as-committed

test: $(STAMP)
	$(BIN)/python scripts/committed_notebooks.py $(NB_CHECK)
	$(BIN)/nbstripout --verify $(NB_CHECK)/*.ipynb
	$(BIN)/python -m pytest -q tests
	$(BIN)/python -m pytest -q --nbmake --nbmake-timeout=300 $(NB_CHECK)

bench: $(STAMP)
	for f in benchmarks/*.py; do $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info
