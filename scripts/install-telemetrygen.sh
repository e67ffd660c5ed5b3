#!/usr/bin/env bash
# Installs telemetrygen, OpenTelemetry's load generator (Go), for tests/test_server.py's
# telemetrygen test and as a second client of bench/serve.py (--telemetrygen). It goes to
# `go env GOPATH`/bin (~/go/bin), where the test looks (or set TELEMETRYGEN=/path/to/it).
# Without a Go toolchain, or when the module cannot be fetched, it says why and exits 0:
# the test is then skipped with that reason. About a minute the first time.
set -euo pipefail
VERSION=${TELEMETRYGEN_VERSION:-v0.161.0}
MODULE=github.com/open-telemetry/opentelemetry-collector-contrib/cmd/telemetrygen
if ! command -v go >/dev/null 2>&1; then
  echo "install-telemetrygen: no go command; the telemetrygen test will be skipped" >&2
  exit 0
fi
BIN="$(go env GOPATH)/bin/telemetrygen"
if [ -x "$BIN" ] && go version -m "$BIN" 2>/dev/null | grep -Eq "^\s+mod\s+$MODULE\s+$VERSION\s"; then
  exit 0  # this version is there already
fi
if ! go install "$MODULE@$VERSION"; then
  echo "install-telemetrygen: go install $MODULE@$VERSION failed; the telemetrygen test will be skipped" >&2
fi
exit 0
