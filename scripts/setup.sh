#!/usr/bin/env bash
# Creates .venv (if missing) and installs rootsift with its development extras.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e ".[dev]"
# The optional native OTLP scanner (native/, ADR 0028), built where cargo is installed
# and again only when its sources change; without it the server converts in Python.
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
if command -v cargo >/dev/null 2>&1; then
  stamp=$(cat native/Cargo.toml native/Cargo.lock native/pyproject.toml native/src/*.rs | sha256sum | cut -d' ' -f1)
  if [ "$(cat .venv/.rootsift-native 2>/dev/null)" != "$stamp" ] || ! .venv/bin/python -c "import rootsift_native" 2>/dev/null; then
    echo "setup: building the native OTLP scanner (native/, about a minute the first time)" >&2
    .venv/bin/python -m pip install -q ./native
    echo "$stamp" > .venv/.rootsift-native
  fi
else
  echo "setup: cargo not found: the native OTLP scanner is not built (the server converts in Python)" >&2
fi
