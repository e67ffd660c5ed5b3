#!/usr/bin/env bash
# A throwaway nginx reverse proxy in front of scripts/sources/upstream.py.
#
#   nginx.sh start DIR PORT UPSTREAM_PORT [SLOW_SECONDS]   start both on 127.0.0.1
#   nginx.sh load DIR PORT [REQUESTS]                       run http_load.py, report in DIR/load.json
#   nginx.sh stop DIR                                       stop nginx and the upstream
#
# Logs: DIR/logs/timing.log in the format written to DIR/log_format.txt (request,
# upstream connect/header/response times, upstream address and status) and
# DIR/logs/combined.log in nginx's predefined "combined" format, for the same requests.
# /api/ is proxied to the upstream (its /api/slow answers after SLOW_SECONDS), /flaky/
# to an upstream group whose first peer (127.0.0.1:1) refuses connections, /static/ and
# /health are answered by nginx itself. $time_local is in $NGINX_TZ (default $TZ, else
# UTC). Runs with -p DIR and -e, so neither /etc/nginx nor /var/log/nginx is used.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
LOG_FORMAT='$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" rt=$request_time uct="$upstream_connect_time" uht="$upstream_header_time" urt="$upstream_response_time" ua="$upstream_addr" us="$upstream_status"'

cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
  sed -n '2,14p' "$0" >&2
  exit 2
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
if [ ! -x "$NGINX" ]; then
  echo "nginx.sh: nginx not found (run scripts/sources/install.sh)" >&2
  exit 3
fi

wait_port() {
  local port=$1
  for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
    sleep 0.05
  done
  return 1
}

case "$cmd" in
start)
  port=${3:?start needs a PORT}
  up=${4:?start needs an UPSTREAM_PORT}
  slow=${5:-0.15}
  mkdir -p "$dir/logs" "$dir/tmp" "$dir/html/static"
  printf 'hello\n' >"$dir/html/static/hello.txt"
  printf '%s\n' "$LOG_FORMAT" >"$dir/log_format.txt"
  "$PY" "$HERE/upstream.py" "$up" "$slow" </dev/null >"$dir/upstream.out" 2>&1 &
  echo $! >"$dir/upstream.pid"
  cat >"$dir/nginx.conf" <<EOF
user root;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
events { worker_connections 256; }
http {
  client_body_temp_path $dir/tmp/body;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  default_type text/plain;
  log_format timing '$LOG_FORMAT';
  access_log $dir/logs/timing.log timing;
  access_log $dir/logs/combined.log combined;
  upstream backend { server 127.0.0.1:$up; keepalive 8; }
  upstream flaky { server 127.0.0.1:1 max_fails=0; server 127.0.0.1:$up max_fails=0; }
  server {
    listen 127.0.0.1:$port;
    server_name localhost;
    root $dir/html;
    location /api/ {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
    location /flaky/ {
      rewrite ^/flaky/(.*)\$ /api/\$1 break;
      proxy_pass http://flaky;
    }
    location = /health { return 200 "healthy\n"; }
    location /static/ { }
  }
}
EOF
  # $time_local is written in the zone of TZ (nginx keeps TZ for its workers)
  TZ=${NGINX_TZ:-${TZ:-UTC}} "$NGINX" -p "$dir" -c "$dir/nginx.conf" -e "$dir/logs/error.log"
  if ! wait_port "$port" || ! wait_port "$up"; then
    echo "nginx.sh: nginx or the upstream did not start; see $dir/logs/error.log, $dir/upstream.out" >&2
    exit 1
  fi
  echo "nginx.sh: started $("$NGINX" -v 2>&1 | sed 's/.*: //') on 127.0.0.1:$port -> 127.0.0.1:$up, logs in $dir/logs"
  ;;
load)
  port=${3:?load needs a PORT}
  n=${4:-500}
  "$PY" "$HERE/http_load.py" "http://127.0.0.1:$port" "$n" >"$dir/load.json"
  ;;
stop)
  if [ -f "$dir/nginx.pid" ]; then
    pid=$(cat "$dir/nginx.pid")
    # quit = graceful: every access log line is written before the master exits.
    "$NGINX" -p "$dir" -c "$dir/nginx.conf" -e "$dir/logs/error.log" -s quit 2>/dev/null || kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
  fi
  if [ -f "$dir/upstream.pid" ]; then
    kill "$(cat "$dir/upstream.pid")" 2>/dev/null || true
    rm -f "$dir/upstream.pid"
  fi
  ;;
*)
  echo "nginx.sh: unknown command $cmd (start, load or stop)" >&2
  exit 2
  ;;
esac
