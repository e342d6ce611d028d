# A hookflow-server on a fresh data directory and a free loopback port, for the CI scripts that drive a real one.
# Source it, then: start_server NAME BINARY [extra server arguments...] sets `work` (a scratch directory removed on
# exit), `base` and `server` (the pid); wait_ready then sets `admin_key` and `org` from the first start's output.
# The server's log outlives the run at ${TMPDIR:-/tmp}/hookflow-NAME-server.log, for a failure's investigation.

start_server() {
  local name="$1" binary="$2"
  shift 2
  work="$(mktemp -d "/tmp/hookflow-$name.XXXXXX")"
  chmod 755 "$work"
  local port
  port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  base="http://127.0.0.1:$port"
  "$binary" --data-dir "$work/data" --listen "127.0.0.1:$port" --metrics-listen off "$@" \
    >"$work/server.out" 2>"$work/server.err" &
  server=$!
  server_log="${TMPDIR:-/tmp}/hookflow-$name-server.log"
  trap stop_server EXIT
}

stop_server() {
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  cp "$work/server.err" "$server_log" 2>/dev/null || true
  rm -rf "$work"
}

wait_ready() {
  for _ in $(seq 1 120); do
    curl -fsS "$base/readyz" >/dev/null 2>&1 && break
    kill -0 "$server" 2>/dev/null || { cat "$work/server.err" >&2; exit 1; }
    sleep 0.5
  done
  curl -fsS "$base/readyz" >/dev/null || { echo "the server did not get ready" >&2; exit 1; }
  admin_key="$(sed -n 's/^ *api key: *//p' "$work/server.out")"
  org="$(sed -n 's/^ *organization id: *//p' "$work/server.out")"
  [ -n "$admin_key" ] && [ -n "$org" ] || { echo "no bootstrap key in the server's output" >&2; exit 1; }
}
