"""Smoke test of the Python client openapi-python-client generates from the served OpenAPI document.

Run by run.sh against a real server (embedded runner on), with the generated package `hookflow_client` on
PYTHONPATH and HOOKFLOW_BASE_URL, HOOKFLOW_API_KEY, HOOKFLOW_ORG_ID in the environment. Every call goes through
the generated operation modules, and every answer must parse into the generated model the document promises
for that status: an unexpected status, an error body or an unparsed answer fails the run.
"""

from __future__ import annotations

import os
import sys
import time
import typing
import uuid
from typing import Any, TypeVar

import attrs
import httpx

import hookflow_client.models as models
from hookflow_client import AuthenticatedClient, Client
from hookflow_client.api.administration import get_permissions, list_api_keys
from hookflow_client.api.flows import create_flow, get_execution, launch_flow, list_execution_nodes
from hookflow_client.api.webhook import (
    capture_webhook_delete,
    capture_webhook_get,
    capture_webhook_patch,
    capture_webhook_post,
    capture_webhook_put,
    create_webhook,
    get_webhook,
    get_webhook_request,
    list_webhook_requests,
    list_webhooks,
)
from hookflow_client.models import (
    CapturedRequest,
    CaptureReceipt,
    CreateWebhook,
    Execution,
    ExecutionStatus,
    Flow,
    Launch,
    NodeResultList,
    NodeStatus,
    PageApiKey,
    PageCapturedRequest,
    PageWebhook,
    Permissions,
    Webhook,
    ValueAssertion,
    ValueAssertionOperator,
    Extractor,
    ExtractorKind,
    FlowDefinition,
    Operator,
    RequestNode,
    RequestNodeKind,
    RequestSpec,
    WriteFlow,
)
from hookflow_client.types import Response, Unset

M = TypeVar("M")

EXECUTION_DEADLINE_S = 60
FINAL = {ExecutionStatus.SUCCEEDED, ExecutionStatus.FAILED, ExecutionStatus.CANCELLED, ExecutionStatus.ERROR}


def expect(what: str, response: Response[Any], status: int | set[int], model: type[M]) -> M:
    """The answer's status is the expected one and its body parsed into `model` (never None, never ErrorBody)."""
    statuses = {status} if isinstance(status, int) else status
    if response.status_code not in statuses or not isinstance(response.parsed, model):
        sys.exit(
            f"{what}: expected {sorted(statuses)} as {model.__name__}, got {int(response.status_code)} "
            f"parsed as {type(response.parsed).__name__}: {response.content[:500]!r}"
        )
    undeclared(what, response.parsed)
    return response.parsed


def undeclared(what: str, value: Any, path: str = "$") -> None:
    """Fails when the server sent a field the document does not declare: a generated model keeps such fields in
    `additional_properties` (map models, which declare no field of their own, hold their entries there)."""
    if isinstance(value, list):
        for i, item in enumerate(value):
            undeclared(what, item, f"{path}[{i}]")
        return
    if not attrs.has(type(value)):
        return
    names = [f.name for f in attrs.fields(type(value))]
    extra = getattr(value, "additional_properties", None)
    if extra and names != ["additional_properties"]:
        sys.exit(f"{what}: {path} ({type(value).__name__}) has undeclared fields {sorted(extra)}")
    for name in names:
        undeclared(what, getattr(value, name), f"{path}.{name}")


def items_of(what: str, page: Any) -> list[Any]:
    """A page's items, each an instance of the item model the page's generated class declares."""
    page_model = type(page)
    hints = typing.get_type_hints(page_model, globalns={**vars(sys.modules[page_model.__module__]), **vars(models)})
    (item_model,) = typing.get_args(hints["items"])
    for item in page.items:
        if not isinstance(item, item_model):
            sys.exit(f"{what}: an item parsed as {type(item).__name__}, not {item_model.__name__}")
    return list(page.items)


def main() -> None:
    base = os.environ["HOOKFLOW_BASE_URL"].rstrip("/")
    # The generated operations take an AuthenticatedClient (the document's security schemes); its token header is
    # renamed to the API key's, and the organization goes with every request.
    api = AuthenticatedClient(
        base_url=base,
        token=os.environ["HOOKFLOW_API_KEY"],
        prefix="",
        auth_header_name="X-Api-Key",
        headers={"X-Organization-Id": os.environ["HOOKFLOW_ORG_ID"]},
        raise_on_unexpected_status=True,
        timeout=httpx.Timeout(30.0),
    )

    permissions = expect("get_permissions", get_permissions.sync_detailed(client=api), 200, Permissions)
    assert permissions.scopes and permissions.presets, "no scopes or presets"

    # --- Webhook endpoint and captures -------------------------------------------------------------------------
    name = f"clients-smoke-{uuid.uuid4().hex[:8]}"
    webhook = expect(
        "create_webhook",
        create_webhook.sync_detailed(client=api, body=CreateWebhook(name=name, description="generated client smoke")),
        201,
        Webhook,
    )
    assert webhook.name == name
    assert webhook.capture_url == f"{base}/webhook/{webhook.id}", webhook.capture_url
    listed = expect("list_webhooks", list_webhooks.sync_detailed(client=api, limit=100), 200, PageWebhook)
    assert webhook.id in {w.id for w in items_of("list_webhooks", listed)}, "the new endpoint is not listed"
    again = expect("get_webhook", get_webhook.sync_detailed(webhook.id, client=api), 200, Webhook)
    assert again.id == webhook.id and again.capture_url == webhook.capture_url

    # Captures go to the endpoint's capture URL, unauthenticated: a plain client whose base is that URL's origin
    # (no API key in the captured headers), through the generated capture operations.
    capture_base = webhook.capture_url.removesuffix(f"/webhook/{webhook.id}")
    sender = Client(
        base_url=capture_base,
        headers={"X-Smoke": "generated-client"},
        raise_on_unexpected_status=True,
        timeout=httpx.Timeout(30.0),
    )
    receipts: dict[str, CaptureReceipt] = {}
    for method, operation in (
        ("POST", capture_webhook_post),
        ("GET", capture_webhook_get),
        ("PUT", capture_webhook_put),
        ("PATCH", capture_webhook_patch),
        ("DELETE", capture_webhook_delete),
    ):
            # The capture operations need no credentials (`security: []`): a plain Client.
        receipt = expect(
            f"capture_webhook_{method.lower()}",
            operation.sync_detailed(webhook.id, client=sender),
            200,
            CaptureReceipt,
        )
        receipts[method] = receipt

    page = expect(
        "list_webhook_requests",
        list_webhook_requests.sync_detailed(webhook.id, client=api, limit=100),
        200,
        PageCapturedRequest,
    )
    captured = items_of("list_webhook_requests", page)
    assert {c.id for c in captured} == {r.request_id for r in receipts.values()}, "captures listed != receipts"
    assert sorted(c.method for c in captured) == sorted(receipts), [c.method for c in captured]
    posted = expect(
        "get_webhook_request",
        get_webhook_request.sync_detailed(webhook.id, receipts["POST"].request_id, client=api),
        200,
        CapturedRequest,
    )
    assert posted.webhook_id == webhook.id and posted.method == "POST" and posted.path == "", posted
    assert ["x-smoke", "generated-client"] in [[n.lower(), v] for n, v in posted.headers], posted.headers
    assert not any(n.lower() == "x-api-key" for n, _ in posted.headers), "the API key reached the capture"

    # --- Flow, launch, execution --------------------------------------------------------------------------------
    # The definition is built from the generated node models (a union discriminated by `kind`), no raw JSON.
    definition = FlowDefinition(
        nodes=[
            RequestNode(
                id="health",
                kind=RequestNodeKind.REQUEST,
                request=RequestSpec(method="GET", url=f"{base}/healthz"),
                extractors=[
                    Extractor(name="code", kind=ExtractorKind.STATUSCODE),
                    Extractor(name="health", kind=ExtractorKind.JSONPATH, expression="$.status"),
                ],
                assertions=[
                    ValueAssertion(source="code", operator=ValueAssertionOperator.EQUALS, expected=200),
                    ValueAssertion(source="health", operator=ValueAssertionOperator.EQUALS, expected="ok"),
                ],
            )
        ]
    )
    flow = expect(
        "create_flow",
        create_flow.sync_detailed(
            client=api,
            body=WriteFlow(name=name, tags=["clients-smoke"], definition=definition),
        ),
        201,
        Flow,
    )
    assert flow.name == name and flow.tags == ["clients-smoke"]
    (node,) = flow.definition.nodes
    assert isinstance(node, RequestNode) and node.id == "health", flow.definition
    launched = expect(
        "launch_flow",
        launch_flow.sync_detailed(flow.id, client=api, body=Launch(), idempotency_key=f"smoke-{uuid.uuid4()}"),
        201,
        Execution,
    )
    assert launched.flow_id == flow.id

    deadline = time.monotonic() + EXECUTION_DEADLINE_S
    while True:
        execution = expect(
            "get_execution", get_execution.sync_detailed(flow.id, launched.id, client=api), 200, Execution
        )
        if execution.status in FINAL:
            break
        if time.monotonic() > deadline:
            sys.exit(f"execution {execution.id} still {execution.status} after {EXECUTION_DEADLINE_S} s")
        time.sleep(0.2)
    assert execution.status == ExecutionStatus.SUCCEEDED, f"execution ended {execution.status}: {execution.error}"
    assert (execution.summary.nodes_total, execution.summary.passed) == (1, 1), execution.summary

    nodes = expect(
        "list_execution_nodes",
        list_execution_nodes.sync_detailed(flow.id, launched.id, client=api),
        200,
        NodeResultList,
    )
    assert [(n.node_id, n.status) for n in nodes.items] == [("health", NodeStatus.PASSED)], nodes.items
    node = nodes.items[0]
    assert not isinstance(node.response, Unset) and node.response is not None, node
    assert node.response.status == 200, node.response
    assert not isinstance(node.assertions, Unset) and [a.passed for a in node.assertions] == [True, True], node

    # --- API keys ---------------------------------------------------------------------------------------------
    keys = expect("list_api_keys", list_api_keys.sync_detailed(client=api, limit=100), 200, PageApiKey)
    assert items_of("list_api_keys", keys), "no API keys listed"

    print(
        f"python smoke: endpoint {webhook.id}, {len(captured)} captures, "
        f"execution {execution.id} {execution.status} in {execution.duration_ms} ms, {len(keys.items)} api keys"
    )


if __name__ == "__main__":
    main()
