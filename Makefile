# The README's two commands are `make demo` and `make test`; the rest are helpers.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
RUST   := Cargo.toml $(wildcard src/*.rs src/**/*.rs)

.PHONY: demo test install lint format servers bench-smoke clean

demo: install
	$(PY) -m tesseradb.quickstart

test: install servers
	$(MAKE) lint
	cargo test --quiet
	$(PY) -m mypy.stubtest tesseradb._core
	$(PY) -m pytest --numprocesses=auto --maxprocesses=4 --durations=20

# Creates .venv and installs the package (building the Rust extension) with
# its development tools; redone when the build inputs change.
install: $(STAMP)
$(STAMP): pyproject.toml $(RUST)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	touch $@

# PostgreSQL and MariaDB from Debian's packages, for the server tests.
servers:
	@scripts/install-servers.sh

lint: install
	$(VENV)/bin/ruff format --check python tests
	$(VENV)/bin/ruff check python tests
	cargo fmt --check
	cargo clippy --quiet --all-targets -- -D warnings

format: install
	$(VENV)/bin/ruff format python tests
	$(VENV)/bin/ruff check --fix python tests
	cargo fmt

clean:
	rm -rf $(VENV) target python/tesseradb/_core*.so
