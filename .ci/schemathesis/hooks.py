"""Schemathesis hooks for hookflow's conformance run: the run never deletes the key it authenticates with."""

import os

import schemathesis

OWN_KEY_ID = os.environ["HOOKFLOW_OWN_KEY_ID"].lower()


@schemathesis.hook
def filter_case(context, case):
    operation = case.operation
    deletes_own_key = (
        operation.method.upper() == "DELETE"
        and operation.path == "/api-keys/{id}"
        and str((case.path_parameters or {}).get("id", "")).lower() == OWN_KEY_ID
    )
    return not deletes_own_key


@schemathesis.hook
def before_call(context, case, **kwargs):
    """A runner's long polls (jobs, deliveries) wait up to `wait_s` (default 30 s and 20 s, null meaning the
    default) when nothing is queued: longer than the run's read timeout. Valid waits are shortened to one second
    (invalid ones are sent as they are, so every check still runs)."""
    long_polls = ("/runner/jobs/next", "/runner/deliveries/next")
    if case.operation.path not in long_polls or not isinstance(case.body, dict):
        return
    wait = case.body.get("wait_s")
    # JSON has one number type: 10.0 is the integer 10 to the server.
    number = isinstance(wait, (int, float)) and not isinstance(wait, bool) and float(wait).is_integer()
    valid = wait is None or (number and 1 < wait <= 60)
    if valid:
        case.body["wait_s"] = 1
