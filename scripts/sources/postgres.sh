#!/usr/bin/env bash
# A throwaway PostgreSQL server that logs every statement, in stderr, CSV and JSON form.
#
#   postgres.sh start DIR PORT    initdb in DIR/data and start on 127.0.0.1:PORT
#   postgres.sh load DIR PORT TX  pgbench -i; pgbench -c 2 -t TX (simple protocol, report in
#                                 DIR/pgbench.out); -M prepared -t TX/4+1 as app
#                                 pgbench-prepared (DIR/pgbench-prepared.out); -t TX/10+1 as
#                                 pgbench-split with log_statement=all + log_duration
#                                 instead (DIR/pgbench-split.out); a few extras
#   postgres.sh stop DIR          stop the server (fast shutdown); the logs stay in DIR/log
#
# Logs: DIR/log/postgresql.log (stderr, prefix $PG_LOG_LINE_PREFIX), .csv and .json, with
# times in $PG_LOG_TIMEZONE (default UTC; PostgreSQL prints its abbreviation, e.g. EST).
# pgbench's report goes to DIR/pgbench.out. PostgreSQL refuses to run as root, so the
# server and initdb run as the postgres OS user (when run as root), which then owns DIR;
# DIR's parent must be searchable by that user (a directory under /tmp is; pytest's
# tmp_path is not).
# Nothing outside DIR is touched.
set -euo pipefail

PREFIX_DEFAULT='%m [%p]: [%l-1] user=%u,db=%d,app=%a,client=%h '
PG_LOG_LINE_PREFIX=${PG_LOG_LINE_PREFIX:-$PREFIX_DEFAULT}
PG_LOG_TIMEZONE=${PG_LOG_TIMEZONE:-UTC}
PG_USER=${PG_USER:-postgres}

pg_bin() {
  local dir best=""
  for dir in /usr/lib/postgresql/*/bin; do
    [ -x "$dir/postgres" ] && [ -x "$dir/pgbench" ] && best=$dir
  done
  if [ -z "$best" ]; then
    echo "postgres.sh: no PostgreSQL server under /usr/lib/postgresql (run scripts/sources/install.sh)" >&2
    exit 3
  fi
  printf '%s' "$best"
}

if [ "$(id -u)" -eq 0 ]; then
  as_pg() { runuser -u "$PG_USER" -- "$@"; }
else
  as_pg() { "$@"; } # not root: the server runs as whoever runs this
fi

cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
  sed -n '2,8p' "$0" >&2
  exit 2
fi
BIN=$(pg_bin)

case "$cmd" in
start)
  port=${3:?start needs a PORT}
  mkdir -p "$dir/log"
  [ "$(id -u)" -ne 0 ] || chown -R "$PG_USER:" "$dir"
  chmod 700 "$dir"
  if ! as_pg test -w "$dir"; then
    echo "postgres.sh: user $PG_USER cannot reach $dir (is a parent directory private?)" >&2
    exit 3
  fi
  as_pg "$BIN/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C --no-sync >"$dir/initdb.out" 2>&1
  cat >>"$dir/data/postgresql.conf" <<EOF

# rootsift real-source test settings
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
logging_collector = on
log_destination = 'stderr,csvlog,jsonlog'
log_directory = '$dir/log'
log_filename = 'postgresql.log'
log_rotation_age = 0
log_rotation_size = 0
log_min_duration_statement = 0
log_line_prefix = '$PG_LOG_LINE_PREFIX'
log_connections = on
log_disconnections = on
log_checkpoints = on
log_lock_waits = on
log_temp_files = 0
log_autovacuum_min_duration = 0
lc_messages = 'C'
log_timezone = '$PG_LOG_TIMEZONE'
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 32MB
EOF
  as_pg "$BIN/pg_ctl" -D "$dir/data" -l "$dir/startup.log" -w -t 60 start >/dev/null
  echo "postgres.sh: started $("$BIN/postgres" --version) on 127.0.0.1:$port, logs in $dir/log"
  ;;
load)
  port=${3:?load needs a PORT}
  tx=${4:-200}
  conn=(-h 127.0.0.1 -p "$port" -U postgres)
  "$BIN/pgbench" "${conn[@]}" -i -s 1 -q postgres >"$dir/pgbench-init.out" 2>&1
  "$BIN/pgbench" "${conn[@]}" -c 2 -j 2 -t "$tx" -M simple postgres >"$dir/pgbench.out" 2>&1
  # The extended protocol logs parse, bind and execute steps, with the parameters as DETAIL.
  PGAPPNAME=pgbench-prepared "$BIN/pgbench" "${conn[@]}" -n -c 2 -j 2 -t "$((tx / 4 + 1))" -M prepared postgres \
    >"$dir/pgbench-prepared.out" 2>&1
  # log_statement=all + log_duration instead: the statement and its duration on two lines.
  settings() {
    "$BIN/psql" "${conn[@]}" -X -q -d postgres -v ON_ERROR_STOP=1 \
      -c "ALTER SYSTEM $1 log_min_duration_statement$2" -c "ALTER SYSTEM $1 log_statement$3" \
      -c "ALTER SYSTEM $1 log_duration$4" -c "SELECT pg_reload_conf()" >/dev/null
    for _ in $(seq 1 100); do # the reload is asynchronous: wait until new sessions see it
      [ "$("$BIN/psql" "${conn[@]}" -X -At -d postgres -c 'SHOW log_duration')" = "$5" ] && return 0
      sleep 0.05
    done
    echo "postgres.sh: configuration reload not seen" >&2
    return 1
  }
  settings SET " = -1" " = 'all'" " = on" on
  PGAPPNAME=pgbench-split "$BIN/pgbench" "${conn[@]}" -n -c 2 -j 2 -t "$((tx / 10 + 1))" -M simple postgres \
    >"$dir/pgbench-split.out" 2>&1
  settings RESET "" "" "" off
  # A slow statement, a multi-line one and an error, as real applications send them.
  PGAPPNAME=rootsift-extras "$BIN/psql" "${conn[@]}" -X -q -d postgres >"$dir/extras.out" 2>&1 <<'EOF' || true
SELECT pg_sleep(0.25);
SELECT aid,
       abalance
  FROM pgbench_accounts
 WHERE aid <= 3
 ORDER BY aid;
SELEC 1;
EOF
  ;;
stop)
  if [ -f "$dir/data/postmaster.pid" ]; then
    as_pg "$BIN/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null
  fi
  ;;
*)
  echo "postgres.sh: unknown command $cmd (start, load or stop)" >&2
  exit 2
  ;;
esac
