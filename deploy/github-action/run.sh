#!/usr/bin/env bash
# The hookflow action's step: mask the key, turn the INPUT_* variables into `hookflow run` arguments (as array
# elements, never evaluated as shell text), run, and report the exit code. Never enable `set -x` here.
set -euo pipefail

# First of all: the key must never show in the log.
if [[ -n "${INPUT_API_KEY:-}" ]]; then
  printf '::add-mask::%s\n' "${INPUT_API_KEY}"
fi

fail() {
  printf '::error title=hookflow::%s\n' "$1"
  exit 2
}

output() {
  if [[ -n "${GITHUB_OUTPUT:-}" ]]; then
    printf '%s=%s\n' "$1" "$2" >>"${GITHUB_OUTPUT}"
  fi
}

# Splits $1 on the characters in $2 into the array named $3, dropping empty items and surrounding blanks.
split_into() {
  local text="$1" separators="$2" item
  local -n into="$3"
  into=()
  local IFS="$separators"
  set -f
  for item in $text; do
    item="${item#"${item%%[![:space:]]*}"}"
    item="${item%"${item##*[![:space:]]}"}"
    [[ -n "$item" ]] && into+=("$item")
  done
  set +f
}

[[ -n "${INPUT_API_KEY:-}" ]] || fail "the api-key input is empty (pass it from a secret)"
[[ -n "${INPUT_ORGANIZATION_ID:-}" ]] || fail "the organization-id input is empty"

mode="${INPUT_MODE:-ephemeral}"
# Rows are queued for the organization's runners: a data-driven run is remote.
if [[ -n "${INPUT_DATA:-}" ]]; then mode=remote; fi
args=(run --mode "$mode")
if [[ -n "${INPUT_DATA:-}" ]]; then args+=(--data "${INPUT_DATA}"); fi
if [[ -n "${INPUT_NAME_COLUMN:-}" ]]; then
  [[ -n "${INPUT_DATA:-}" ]] || fail "name-column needs the data input"
  args+=(--name-column "${INPUT_NAME_COLUMN}")
fi
split_into "${INPUT_FLOW_IDS:-}" $', \n\t' flow_ids
for id in "${flow_ids[@]}"; do args+=(--flow "$id"); done
split_into "${INPUT_TAGS:-}" $',\n' tags
for tag in "${tags[@]}"; do args+=(--tag "$tag"); done
split_into "${INPUT_PATHS:-}" $'\n' paths
if [[ ${#flow_ids[@]} -eq 0 && ${#tags[@]} -eq 0 && ${#paths[@]} -eq 0 ]]; then
  fail "set flow-ids, tags or paths: nothing to run"
fi
if [[ -n "${INPUT_ENVIRONMENT:-}" ]]; then args+=(--env "${INPUT_ENVIRONMENT}"); fi
if [[ -n "${INPUT_REPORT_PATH:-}" ]]; then
  # A new line would let the input write other outputs into $GITHUB_OUTPUT.
  case "${INPUT_REPORT_PATH}" in
    *$'\n'* | *$'\r'*) fail "the report-path input holds a line break" ;;
  esac
  args+=(--report "junit=${INPUT_REPORT_PATH}")
  output report-path "${INPUT_REPORT_PATH}"
fi

bin="${INPUT_HOOKFLOW_PATH:-}"
if [[ -z "$bin" ]]; then
  if command -v hookflow >/dev/null 2>&1; then
    bin="$(command -v hookflow)"
  elif command -v cargo >/dev/null 2>&1 && [[ -n "${GITHUB_ACTION_PATH:-}" ]]; then
    root="${RUNNER_TEMP:-/tmp}/hookflow-cli"
    echo "hookflow is not on PATH; building it from the action's source"
    cargo install --quiet --locked --path "${GITHUB_ACTION_PATH}/../../cli" --root "$root"
    bin="$root/bin/hookflow"
  else
    fail "hookflow is not on PATH and cargo is not available to build it; set hookflow-path"
  fi
fi

export SERVICE_API_KEY="${INPUT_API_KEY}"
export SERVICE_ORGANIZATION_ID="${INPUT_ORGANIZATION_ID}"
if [[ -n "${INPUT_BASE_URL:-}" ]]; then export SERVICE_URL="${INPUT_BASE_URL}"; fi

# Flow files go last, after `--`, so a path is never read as an option.
if [[ ${#paths[@]} -gt 0 ]]; then args+=(-- "${paths[@]}"); fi

set +e
"$bin" "${args[@]}"
code=$?
set -e
output exit-code "$code"
case "$code" in
  0) ;;
  1) printf '::error title=hookflow::%s\n' "a flow did not pass" ;;
  *) printf '::error title=hookflow::%s\n' "hookflow stopped with exit code $code (see its message above)" ;;
esac
exit "$code"
