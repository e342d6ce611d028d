#!/usr/bin/env bash
# API conformance: schemathesis (25 examples per operation, every check) against a real server started on a
# fresh data directory, with a key of every scope. Exemptions live in schemathesis.toml, each with its reason.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
version=4.32.5

if ! st --version 2>/dev/null | grep -q "$version"; then
  python3 -m pip install --quiet "schemathesis==$version"
fi
cargo build --quiet -p hookflow-control-plane --bin hookflow-server

# shellcheck source=../lib/server.sh
. "$root/.ci/lib/server.sh"
start_server schemathesis "$root/target/debug/hookflow-server" --embedded-runner off
wait_ready

# A key of every scope for schemathesis; the bootstrap key stays out of the run.
created="$(curl -fsS -X POST "$base/api-keys" -H "X-Api-Key: $admin_key" -H "X-Organization-Id: $org" \
  -H 'Content-Type: application/json' \
  -d "$(curl -fsS "$base/permissions" -H "X-Api-Key: $admin_key" -H "X-Organization-Id: $org" |
    python3 -c 'import json, sys; print(json.dumps({"name": "schemathesis", "scopes": [s["scope"] for s in json.load(sys.stdin)["scopes"]]}))')")"
key="$(printf '%s' "$created" | python3 -c 'import json, sys; print(json.load(sys.stdin)["key"])')"
key_id="$(printf '%s' "$created" | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')"

status=0
HOOKFLOW_OWN_KEY_ID="$key_id" SCHEMATHESIS_HOOKS=hooks PYTHONPATH="$here" \
  st --config-file "$here/schemathesis.toml" run "$base/openapi.json" \
  -H "X-Api-Key: $key" -H "X-Organization-Id: $org" \
  --max-examples 25 --seed 1 --no-color "$@" || status=$?

# The run must have kept its key: otherwise later operations were only ever answered 401.
if ! curl -fsS -o /dev/null "$base/api-keys/$key_id" -H "X-Api-Key: $key" -H "X-Organization-Id: $org"; then
  echo "schemathesis lost its own key during the run" >&2
  status=1
fi
if grep -q "panicked" "$work/server.err"; then
  echo "the server panicked during the run:" >&2
  grep -A5 "panicked" "$work/server.err" >&2
  status=1
fi
exit "$status"
