#!/usr/bin/env bash
# Snapshots this machine's /proc the way a memory-tracking cron job does
# (cat /proc/meminfo > ~/memtest/meminfo_$(date +%Y-%m-%d.%H:%M)).
#
#   procfs.sh snapshot DIR [STAMP]   copy meminfo, net/tcp, net/sockstat, self/status,
#                                    cgroups and (when readable) slabinfo into DIR as
#                                    KIND_STAMP; STAMP defaults to date +%Y-%m-%d.%H:%M
#
# Prints the names written, one a line. Reads /proc only; writes only DIR.
set -euo pipefail

cmd=${1:-}
dir=${2:-}
if [ "$cmd" != snapshot ] || [ -z "$dir" ]; then
  sed -n '2,9p' "$0" >&2
  exit 2
fi
now=${3:-$(date +%Y-%m-%d.%H:%M)}
mkdir -p "$dir"
copy() {
  local src=$1 kind=$2
  if [ -r "$src" ] && cat "$src" >"$dir/${kind}_$now" 2>/dev/null; then
    echo "${kind}_$now"
  else
    rm -f "$dir/${kind}_$now"
  fi
}
copy /proc/meminfo meminfo
copy /proc/net/tcp tcp
copy /proc/net/sockstat sockstat
copy /proc/self/status status
copy /proc/cgroups cgroups
copy /proc/slabinfo slabinfo
