# The README's two commands: `make lab` and `make test`. Both create .venv when missing.
PY ?= python3
PORT ?= 8888
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: lab test bench clean strip-filter

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@echo "Installing kvviz with JupyterLab, torch and the test tools into $(VENV) (a few minutes, progress below)"
	$(BIN)/python -m pip install --progress-bar on -e '.[lab,test]'
	touch $(STAMP)

# Notebooks as git holds them (kvviz/tools/notebook_save.py says why both are needed). `make lab` saves each notebook
# through a pre-save hook that strips it as nbstripout does, so saving an executed notebook leaves `git status` clean
# (tests/test_teaching.py saves one as JupyterLab does and checks); and it sets up the git filter the committed
# .gitattributes names, for notebooks written by other editors: this venv's nbstripout (an absolute path, replacing
# a filter another checkout's venv wrote), with the metadata keys the hook strips too. Set with git config rather
# than `nbstripout --install`, whose attributes file lands where a git worktree never reads it. Nothing happens
# outside a git checkout.
NB_STRIP := "$(abspath $(BIN))/python" -m nbstripout
SAVE_HOOK := --ContentsManager.pre_save_hook=kvviz.tools.notebook_save.strip_on_save

strip-filter:
	@if git rev-parse --git-dir >/dev/null 2>&1; then \
		git config filter.nbstripout.clean '$(NB_STRIP)' && git config filter.nbstripout.smudge cat && \
		git config filter.nbstripout.required true && \
		git config filter.nbstripout.extrakeys "$$($(BIN)/python -m kvviz.tools.notebook_save --extra-keys)" && \
		git config diff.ipynb.textconv '$(NB_STRIP) -t'; fi

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

lab: $(STAMP) strip-filter
	token=$$($(BIN)/python -c 'import secrets; print(secrets.token_hex(24))') && \
	echo "JupyterLab for kvviz: http://127.0.0.1:$(PORT)/lab?token=$$token" && \
	$(BIN)/jupyter lab --notebook-dir=notebooks $(LAB_SAFE) $(SAVE_HOOK) --ServerApp.port=$(PORT) $(ROOT_FLAG)

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
