#!/usr/bin/env bash
# Sets up the venv and runs every check: ruff, mypy, then the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/ruff check src tests bench
.venv/bin/mypy
.venv/bin/python -m pytest -q "$@"
