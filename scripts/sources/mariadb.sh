#!/usr/bin/env bash
# A throwaway MariaDB server whose slow query log records every statement.
#
#   mariadb.sh start DIR PORT            install a data dir in DIR/data, start on 127.0.0.1:PORT
#   mariadb.sh load DIR ROWS SELECTS     run a known workload (below) with the mariadb client
#   mariadb.sh stop DIR                  shut the server down and wait for it
#
# Slow log: DIR/slow.log (long_query_time=0, log_slow_verbosity=query_plan,explain);
# error log: DIR/error.log; socket DIR/mysqld.sock. The workload, from one client
# session: CREATE DATABASE shop; CREATE TABLE shop.items; ROWS single-row INSERTs;
# SELECTS primary-key SELECTs; one SELECT SLEEP(0.2); one SELECT of a missing table
# (an error); a multi-line UPDATE; then over TCP with schema shop, two SELECT COUNT(*)s. Runs as root with --no-defaults, so /etc/mysql is
# never read and nothing outside DIR is touched.
set -euo pipefail

cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
  sed -n '2,12p' "$0" >&2
  exit 2
fi
MARIADBD=$(command -v mariadbd || echo /usr/sbin/mariadbd)
if [ ! -x "$MARIADBD" ]; then
  echo "mariadb.sh: mariadbd not found (run scripts/sources/install.sh)" >&2
  exit 3
fi
sock=$dir/mysqld.sock
client() { mariadb --no-defaults --socket="$sock" -u root "$@"; }

case "$cmd" in
start)
  port=${3:?start needs a PORT}
  mkdir -p "$dir"
  user=$(id -un)
  mariadb-install-db --no-defaults --datadir="$dir/data" --user="$user" \
    --auth-root-authentication-method=normal --skip-test-db >"$dir/install-db.out" 2>&1
  "$MARIADBD" --no-defaults --user="$user" --datadir="$dir/data" --socket="$sock" \
    --port="$port" --bind-address=127.0.0.1 --pid-file="$dir/mysqld.pid" \
    --log-error="$dir/error.log" --skip-name-resolve --skip-log-bin \
    --innodb-buffer-pool-size=32M --innodb-log-file-size=16M --innodb-flush-log-at-trx-commit=2 \
    --slow-query-log=1 --slow-query-log-file="$dir/slow.log" --long-query-time=0 \
    --log-slow-verbosity=query_plan,explain --log-slow-admin-statements=1 \
    </dev/null >"$dir/mariadbd.out" 2>&1 &
  for _ in $(seq 1 300); do
    if mariadb-admin --no-defaults --socket="$sock" -u root ping >/dev/null 2>&1; then
      echo "mariadb.sh: started $("$MARIADBD" --version | awk '{print $3}') on 127.0.0.1:$port, slow log $dir/slow.log"
      exit 0
    fi
    if ! kill -0 $! 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "mariadb.sh: server did not start; see $dir/error.log:" >&2
  tail -20 "$dir/error.log" >&2 || true
  exit 1
  ;;
load)
  rows=${3:-50}
  selects=${4:-100}
  {
    echo "CREATE DATABASE shop;"
    echo "CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(40), price DECIMAL(8,2));"
    for i in $(seq 1 "$rows"); do
      echo "INSERT INTO shop.items VALUES ($i, 'item-$i', $i.50);"
    done
    for i in $(seq 1 "$selects"); do
      echo "SELECT name, price FROM shop.items WHERE id = $(((i - 1) % rows + 1));"
    done
    echo "SELECT SLEEP(0.2);"
    echo "UPDATE shop.items"
    echo "   SET price = price * 2"
    echo " WHERE id <= 3;"
    echo "SELECT * FROM shop.missing_table;"
  } >"$dir/workload.sql"
  # --force: go on past the deliberate error, as a batch job would.
  client --batch --force <"$dir/workload.sql" >"$dir/workload.out" 2>&1 || true
  # A second session over TCP with a default schema: the log names the client address
  # and writes "use shop;" before the statement.
  port=$(client --batch --skip-column-names -e 'SELECT @@port')
  mariadb --no-defaults --protocol=TCP -h 127.0.0.1 -P "$port" -u root -D shop --batch \
    -e 'SELECT COUNT(*) FROM items; SELECT COUNT(*) FROM items WHERE price > 10;' >>"$dir/workload.out" 2>&1
  ;;
stop)
  if [ -f "$dir/mysqld.pid" ]; then
    pid=$(cat "$dir/mysqld.pid")
    mariadb-admin --no-defaults --socket="$sock" -u root shutdown >/dev/null 2>&1 || kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 300); do
      kill -0 "$pid" 2>/dev/null || exit 0
      sleep 0.1
    done
    echo "mariadb.sh: server $pid did not stop" >&2
    exit 1
  fi
  ;;
*)
  echo "mariadb.sh: unknown command $cmd (start, load or stop)" >&2
  exit 2
  ;;
esac
