#!/usr/bin/env bash
# Installs the real log sources the tests in tests/test_real_sources.py start:
# PostgreSQL (>= 15, for jsonlog) with pgbench, MariaDB server and client, nginx; and
# Chromium, which opens rootsift's HTML reports in tests/test_report.py.
# Idempotent and quick: when every binary is already present, apt is not touched.
# Installing never starts the system-wide services (the tests run their own
# servers in temporary directories), and nothing here edits /etc by hand.
set -euo pipefail

pg_bin() {
  # The newest PostgreSQL server directory holding both postgres and pgbench.
  local dir best=""
  for dir in /usr/lib/postgresql/*/bin; do
    [ -x "$dir/postgres" ] && [ -x "$dir/pgbench" ] && [ -x "$dir/initdb" ] || continue
    best=$dir
  done
  printf '%s' "$best"
}

missing=()
pg=$(pg_bin)
if [ -z "$pg" ] || [ "$(basename "$(dirname "$pg")")" -lt 15 ] 2>/dev/null; then
  missing+=(postgresql postgresql-contrib)
fi
# program:package for every other program the tests run
for need in mariadbd:mariadb-server mariadb-install-db:mariadb-server mariadb:mariadb-client \
  mariadb-admin:mariadb-client nginx:nginx runuser:util-linux chromium:chromium; do
  prog=${need%%:*} pkg=${need#*:}
  if ! command -v "$prog" >/dev/null && [ ! -x "/usr/sbin/$prog" ]; then
    case " ${missing[*]} " in *" $pkg "*) ;; *) missing+=("$pkg") ;; esac
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "sources: postgres ($pg), mariadb, nginx, chromium already installed"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "sources: missing ${missing[*]}; run as root to install them" >&2
  exit 1
fi

# Debian's postinst scripts start the services they install unless
# /usr/sbin/policy-rc.d forbids it; provide one for the duration of the install
# when the machine has none, and remove only the one we put there.
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  made_policy=1
fi
cleanup() { if [ "$made_policy" = 1 ]; then rm -f "$policy"; fi; }
trap cleanup EXIT

start=$(date +%s)
echo "sources: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
echo "sources: installed in $(($(date +%s) - start)) s"
