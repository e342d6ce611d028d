#!/usr/bin/env bash
# Generated clients: the OpenAPI document `hookflow-server openapi` prints must make working clients.
# - openapi-python-client 0.29 generates a Python client; smoke.py drives a real server through it (embedded runner
#   on): an endpoint, captures, a flow launched to success, API keys. Every answer must parse into its model.
# - openapi-typescript 7.13 generates `paths` types; smoke.ts (the same calls through openapi-fetch 0.17) must pass
#   `tsc --noEmit --strict` (TypeScript 5.9.3, pinned in package-lock.json).
# - Generator warnings not listed in warnings.expected fail the run.
# Everything generated goes to a scratch directory under /tmp, removed on exit. HOOKFLOW_SKIP_BUILD=1 skips the
# cargo build and uses target/debug/hookflow-server as it is.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
python_generator=0.29

clock() { date +%s.%N; }
part() { printf 'clients: %-34s %6.1f s\n' "$1" "$(awk -v a="$2" -v b="$(clock)" 'BEGIN { print b - a }')"; }
begin="$(clock)"

t="$(clock)"
if ! python3 -c 'import importlib.metadata as m, sys; sys.exit(not m.version("openapi-python-client").startswith(sys.argv[1] + "."))' \
  "$python_generator" 2>/dev/null; then
  python3 -m pip install --quiet "openapi-python-client==$python_generator.*"
fi
# The generated client's own dependencies: httpx and attrs come with the generator, python-dateutil may not.
python3 -c 'import dateutil' 2>/dev/null || python3 -m pip install --quiet python-dateutil
npm ci --prefix "$here" --no-audit --no-fund --loglevel=error
part "tools (pip, npm ci)" "$t"

if [ "${HOOKFLOW_SKIP_BUILD:-}" != 1 ]; then
  t="$(clock)"
  (cd "$root" && cargo build --quiet -p hookflow-control-plane --bin hookflow-server)
  part "cargo build" "$t"
fi
binary="$root/target/debug/hookflow-server"

# The flow's request goes to this server's own /healthz, on loopback: the first start's organization is on the
# private-network allow-list (README, Runners), so no --allow-private-targets.
server_started="$(clock)"
# shellcheck source=../lib/server.sh
. "$root/.ci/lib/server.sh"
start_server clients "$binary" --embedded-runner on

# While the server starts: the document, both generators and tsc.
t="$(clock)"
"$binary" openapi >"$work/openapi.json"
# Neither generator reports a repeated operationId (openapi-python-client silently keeps one of the modules).
python3 - "$work/openapi.json" <<'EOF'
import collections, json, sys
ids = collections.Counter(
    op["operationId"]
    for item in json.load(open(sys.argv[1]))["paths"].values()
    for op in item.values()
    if isinstance(op, dict) and "operationId" in op
)
repeated = sorted(i for i, n in ids.items() if n > 1)
if repeated:
    sys.exit(f"clients: operationIds used more than once: {', '.join(repeated)}")
EOF
part "openapi document" "$t"

: >"$work/warnings"
t="$(clock)"
mkdir "$work/python"
python_generated=0
if python3 "$here/generate_python.py" "$work/openapi.json" "$here/openapi-python-client.yaml" \
  "$work/python/hookflow_client" "$work/python.warnings"; then
  python_generated=1
fi
cat "$work/python.warnings" >>"$work/warnings" 2>/dev/null || true
part "openapi-python-client generate" "$t"

t="$(clock)"
mkdir "$work/ts"
cp "$here/smoke.ts" "$here/tsconfig.json" "$work/ts/"
ln -s "$here/node_modules" "$work/ts/node_modules"
tsc_status=FAILED
# Run from the scratch directory, so no redocly.yaml of the checkout is picked up.
if (cd "$work/ts" && ./node_modules/.bin/openapi-typescript ../openapi.json -o schema.d.ts) >"$work/ts.out" 2>&1; then
  ts_generated=1
else
  ts_generated=0
fi
cat "$work/ts.out"
sed 's/\x1b\[[0-9;]*m//g' "$work/ts.out" | sed -n 's/^ *⚠ *//p' | sed 's/^/typescript: /' >>"$work/warnings"
part "openapi-typescript" "$t"
t="$(clock)"
if [ "$ts_generated" = 1 ] && (cd "$work/ts" && ./node_modules/.bin/tsc --noEmit --strict -p tsconfig.json); then
  tsc_status=passed
fi
part "tsc --noEmit --strict" "$t"

wait_ready
part "server ready (from its start)" "$server_started"
key="$admin_key"

t="$(clock)"
python_status=FAILED
if [ "$python_generated" = 1 ] && PYTHONPATH="$work/python" HOOKFLOW_BASE_URL="$base" HOOKFLOW_API_KEY="$key" \
  HOOKFLOW_ORG_ID="$org" python3 "$here/smoke.py"; then
  python_status=passed
fi
part "python smoke" "$t"

# Warnings against the allow-list (comments and blank lines aside), line for line.
grep -v -e '^#' -e '^[[:space:]]*$' "$here/warnings.expected" | sort >"$work/allowed" || true
sort "$work/warnings" >"$work/actual"
warned="$(wc -l <"$work/actual" | tr -d ' ')"
allowed="$(wc -l <"$work/allowed" | tr -d ' ')"
unexpected="$(comm -23 "$work/actual" "$work/allowed")"
stale="$(comm -13 "$work/actual" "$work/allowed")"
[ -z "$stale" ] || printf 'clients: allowed in warnings.expected but no longer printed (remove them):\n%s\n' "$stale" >&2
[ -z "$unexpected" ] || printf 'clients: generator warnings not in warnings.expected:\n%s\n' "$unexpected" >&2

status=0
if grep -q "panicked" "$work/server.err"; then
  echo "the server panicked during the run:" >&2
  grep -A5 "panicked" "$work/server.err" >&2
  status=1
fi
[ "$python_status" = passed ] && [ "$tsc_status" = passed ] && [ -z "$unexpected" ] || status=1
part "total" "$begin"
echo "clients: python smoke $python_status, tsc $tsc_status, $warned generator warnings (allowed $allowed)"
exit "$status"
