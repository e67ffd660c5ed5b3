#!/usr/bin/env bash
# Sets up the venv and runs every check: ruff, mypy, then the whole test suite.
# The real-source tests (tests/test_real_sources.py) need PostgreSQL, MariaDB and nginx:
# install.sh installs whichever is missing, and ROOTSIFT_REQUIRE_SOURCES=1 turns a
# missing one into a failure instead of a skip (docs/testing.md).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/ruff check src tests bench
.venv/bin/mypy
./scripts/sources/install.sh
./scripts/install-telemetrygen.sh  # for tests/test_server.py (its test is skipped without go)
export ROOTSIFT_REQUIRE_SOURCES=1
# setup.sh built the native OTLP scanner where cargo is: a missing one is then a failure
if command -v cargo >/dev/null 2>&1 || [ -x "$HOME/.cargo/bin/cargo" ]; then export ROOTSIFT_REQUIRE_NATIVE=1; fi
.venv/bin/python -m pytest -q "$@"
