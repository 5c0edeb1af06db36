# fmcluster — two commands on a fresh machine: `make synth` and `make test`.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# ParallelCluster's schema (offline gate of the parallelcluster examples) in its own venv: it pins CDK v1
PCLUSTER_VENV := .venv-pcluster
CONFIG ?= examples/default.yaml
export CDK_HOME := $(CURDIR)/.cdk
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_VERSION_CHECK := 1
export CDK_DISABLE_CLI_TELEMETRY := true
# bytecode (and pytest's rewritten test modules) in one tree outside the sources: nothing lands beside the runtime
# files, and the test workers and the node scripts they start compile each module once instead of every time.
# PYTHONDONTWRITEBYTECODE, set in some shells to keep __pycache__ out of source trees, would make every process
# compile everything it imports again (a test worker's start costs three to four times as much CPU); with the prefix
# nothing lands in the tree, so it is not passed on.
export PYTHONPYCACHEPREFIX := $(CURDIR)/.pycache
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup synth test lint templates bench clean lock

# Idempotent bootstrap: re-runs only when the inputs change.
setup: $(VENV)/.installed node_modules/.installed $(PCLUSTER_VENV)/.installed

$(VENV)/.installed: pyproject.toml requirements.lock scripts/install-tools.sh
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c requirements.lock -e '.[dev]'
	bash scripts/install-tools.sh
	@touch $@

# --no-deps: the lock lists every package the schema imports; the CDK v1 and jsii pins stay out
$(PCLUSTER_VENV)/.installed: requirements-pcluster.lock
	@test -x $(PCLUSTER_VENV)/bin/python || $(PY) -m venv $(PCLUSTER_VENV)
	$(PCLUSTER_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -r requirements-pcluster.lock
	@touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

synth: setup
	@mkdir -p $(CDK_HOME)
	PATH="$(CURDIR)/$(BIN):$$PATH" node_modules/.bin/cdk synth --quiet -c config=$(CONFIG) --output cdk.out
	@echo "Templates for $(CONFIG) are in cdk.out/"

# every core (pytest-xdist); each worker synthesizes the examples it needs once
test: setup
	$(BIN)/python -m pytest -q -n auto

lint: setup
	$(BIN)/ruff check fmcluster tests bench scripts app.py
	$(BIN)/mypy fmcluster app.py
	$(BIN)/python scripts/cfn_lint_templates.py

# every committed generated file: the examples' templates and the dashboards users import
templates: setup
	$(BIN)/python scripts/templates.py write
	$(BIN)/python scripts/dashboards.py write

bench: setup
	$(BIN)/python bench/synth_speed.py

lock:
	$(BIN)/python -m pip freeze --exclude-editable | grep -v '^fmcluster' > requirements.lock.new && mv requirements.lock.new requirements.lock

clean:
	rm -rf cdk.out .pytest_cache .mypy_cache .ruff_cache .pycache
