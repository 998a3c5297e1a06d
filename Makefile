# Two entry points for a fresh machine (see README): `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 6443
VAR ?= $(CURDIR)/var

.PHONY: run test install install-test etcd lint man bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# A normal (not editable) install: twistd only finds twisted/plugins/ inside site-packages.
install: $(BIN)/python
	$(BIN)/pip install --quiet .

install-test: $(BIN)/python
	$(BIN)/pip install --quiet '.[test]'

# Debian's etcd-server is the real etcd the etcd3 backend is tested against.
etcd:
	@command -v etcd >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq etcd-server >/dev/null; }
	@etcd --version | head -1

run: install
	$(BIN)/python -m apiserver.devrun --port $(PORT) --var $(VAR)

test: install-test etcd
	$(BIN)/python -m pytest -q -p no:randomly

lint: install-test
	$(BIN)/ruff check src tests bench twisted
	$(BIN)/ruff format --check src tests bench twisted
	$(BIN)/mypy

man: install
	$(BIN)/python -m apiserver.options.manpage > man/apiserver.8
	PYTHONPATH=src $(BIN)/python -m apiserver.options.fieldgen > src/apiserver/options/config_fields.py

bench: install-test etcd
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) var build *.egg-info src/*.egg-info
