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
