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
	@echo "Installing kvviz with JupyterLab, torch and the test tools into $(VENV) (a few minutes, progress below)"
	$(BIN)/python -m pip install --progress-bar on -e '.[lab,test]'
	# Strip notebook outputs on `git add`, so saved outputs never reach a commit (only in a git checkout).
	if git rev-parse --git-dir >/dev/null 2>&1; then $(BIN)/nbstripout --install; fi
	touch $(STAMP)

# JupyterLab refuses to start as root unless told; containers and lent machines run as root.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

# Listens on 127.0.0.1 only (never all interfaces, whatever Jupyter's defaults) and always asks
# for a fresh random token: open the URL with ?token=... printed first. Another port: make lab PORT=8889.
# The command line wins over every Jupyter config file, so a user config that turns the token off,
# allows any origin, remote access or no XSRF check is overridden here; tests/test_edges.py starts
# this command (read with `make -n lab`) with such a config and checks a request without the token fails.
LAB_SAFE := --ServerApp.ip=127.0.0.1 --IdentityProvider.token=$$token --ServerApp.allow_origin= \
	--ServerApp.allow_origin_pat= --ServerApp.allow_credentials=False --ServerApp.allow_remote_access=False \
	--ServerApp.disable_check_xsrf=False --ServerApp.trust_xheaders=False

lab: $(STAMP)
	token=$$($(BIN)/python -c 'import secrets; print(secrets.token_hex(24))') && \
	echo "JupyterLab for kvviz: http://127.0.0.1:$(PORT)/lab?token=$$token" && \
	$(BIN)/jupyter lab --notebook-dir=notebooks $(LAB_SAFE) --ServerApp.port=$(PORT) $(ROOT_FLAG)

# The notebooks as git holds them (scripts/committed_notebooks.py): outputs JupyterLab autosaved
# into the working copies never reach a commit, so they never fail the run; a committed one does.
NB_CHECK := build/notebooks-as-committed

# Lint, format and type checks first (configured in pyproject.toml), then the tests and the notebooks.
test: $(STAMP)
	$(BIN)/ruff check kvviz tests scripts benchmarks
	$(BIN)/ruff format --check kvviz tests scripts benchmarks
	$(BIN)/mypy
	$(BIN)/python scripts/committed_notebooks.py $(NB_CHECK)
	$(BIN)/nbstripout --verify $(NB_CHECK)/*.ipynb
	$(BIN)/python -m pytest -q tests
	$(BIN)/python -m pytest -q --nbmake --nbmake-timeout=300 $(NB_CHECK)

bench: $(STAMP)
	for f in benchmarks/*.py; do $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info
