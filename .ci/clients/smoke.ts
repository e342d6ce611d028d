// The Python smoke test's calls, written against the `paths` types openapi-typescript generates from the served
// OpenAPI document and the openapi-fetch client. run.sh only type-checks it (`tsc --noEmit --strict`, next to the
// generated `schema.d.ts`), but it is a whole program: run it with HOOKFLOW_BASE_URL, HOOKFLOW_API_KEY and
// HOOKFLOW_ORG_ID set and it does what smoke.py does.
import createClient from "openapi-fetch";
import type { components, paths } from "./schema";

type Schemas = components["schemas"];
type Execution = Schemas["Execution"];
type ExecutionStatus = Schemas["ExecutionStatus"];
type WriteFlow = Schemas["WriteFlow"];

// The little of Node this program uses (no @types/node in this check).
declare const process: { env: Record<string, string | undefined>; exitCode?: number };

const EXECUTION_DEADLINE_MS = 60_000;
const FINAL: readonly ExecutionStatus[] = ["succeeded", "failed", "cancelled", "error"];

function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

function check(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(message);
}

/** The answer of an openapi-fetch call: its body when the status is the expected one, else an error. */
function expect<D, E>(
  what: string,
  result: { data?: D; error?: E; response: Response },
  status: number | readonly number[],
): D {
  const statuses: readonly number[] = typeof status === "number" ? [status] : status;
  const { data, error, response } = result;
  if (!statuses.includes(response.status) || data === undefined) {
    throw new Error(`${what}: expected ${statuses.join(" or ")}, got ${response.status}: ${JSON.stringify(error)}`);
  }
  return data;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function main(): Promise<void> {
  const base = env("HOOKFLOW_BASE_URL").replace(/\/+$/, "");
  const api = createClient<paths>({
    baseUrl: base,
    headers: { "X-Api-Key": env("HOOKFLOW_API_KEY"), "X-Organization-Id": env("HOOKFLOW_ORG_ID") },
  });

  const permissions = expect("get_permissions", await api.GET("/permissions"), 200);
  check(permissions.scopes.length > 0 && permissions.presets.length > 0, "no scopes or presets");

  // --- Webhook endpoint and captures ---------------------------------------------------------------------------
  const name = `clients-smoke-${crypto.randomUUID().slice(0, 8)}`;
  const webhook = expect(
    "create_webhook",
    await api.POST("/webhooks", { body: { name, description: "generated client smoke" } }),
    201,
  );
  check(webhook.capture_url === `${base}/webhook/${webhook.id}`, `capture_url ${webhook.capture_url}`);
  const listed = expect("list_webhooks", await api.GET("/webhooks", { params: { query: { limit: 100 } } }), 200);
  check(
    listed.items.some((w) => w.id === webhook.id),
    "the new endpoint is not listed",
  );
  const one = { params: { path: { id: webhook.id } } };
  const again = expect("get_webhook", await api.GET("/webhooks/{id}", one), 200);
  check(again.capture_url === webhook.capture_url, "get_webhook answered another capture_url");

  // Captures go to the capture URL's origin, unauthenticated (no API key in the captured headers).
  const sender = createClient<paths>({
    baseUrl: webhook.capture_url.slice(0, -`/webhook/${webhook.id}`.length),
    headers: { "X-Smoke": "generated-client" },
  });
  const receipts = {
    POST: expect("capture_webhook_post", await sender.POST("/webhook/{id}", one), 200),
    GET: expect("capture_webhook_get", await sender.GET("/webhook/{id}", one), 200),
    PUT: expect("capture_webhook_put", await sender.PUT("/webhook/{id}", one), 200),
    PATCH: expect("capture_webhook_patch", await sender.PATCH("/webhook/{id}", one), 200),
    DELETE: expect("capture_webhook_delete", await sender.DELETE("/webhook/{id}", one), 200),
  };
  const receiptIds = new Set(Object.values(receipts).map((r) => r.request_id));

  const page = expect(
    "list_webhook_requests",
    await api.GET("/webhooks/{id}/requests", { params: { path: { id: webhook.id }, query: { limit: 100 } } }),
    200,
  );
  check(
    page.items.length === receiptIds.size && page.items.every((c) => receiptIds.has(c.id)),
    "captures listed != receipts",
  );
  const posted = expect(
    "get_webhook_request",
    await api.GET("/webhooks/{id}/requests/{request_id}", {
      params: { path: { id: webhook.id, request_id: receipts.POST.request_id } },
    }),
    200,
  );
  // `[name, value]` pairs: the schema's tuple reads as `string[]` through openapi-fetch (its Readable<> maps arrays).
  const headers = posted.headers.map(([header = "", value = ""]) => [header.toLowerCase(), value] as const);
  check(posted.method === "POST" && posted.path === "", `captured ${posted.method} ${posted.path}`);
  check(
    headers.some(([header, value]) => header === "x-smoke" && value === "generated-client"),
    "X-Smoke not captured",
  );
  check(!headers.some(([header]) => header === "x-api-key"), "the API key reached the capture");

  // --- Flow, launch, execution ---------------------------------------------------------------------------------
  const flowBody: WriteFlow = {
    name,
    tags: ["clients-smoke"],
    definition: {
      nodes: [
        {
          id: "health",
          kind: "request",
          request: { method: "GET", url: `${base}/healthz` },
          extractors: [
            { name: "code", kind: "statusCode" },
            { name: "health", kind: "jsonPath", expression: "$.status" },
          ],
          assertions: [
            { source: "code", operator: "equals", expected: 200 },
            { source: "health", operator: "equals", expected: "ok" },
          ],
        },
      ],
    },
  };
  const flow = expect("create_flow", await api.POST("/flows", { body: flowBody }), 201);
  const launched = expect(
    "launch_flow",
    await api.POST("/flows/{id}/launch", {
      params: { path: { id: flow.id }, header: { "Idempotency-Key": `smoke-${crypto.randomUUID()}` } },
      body: {},
    }),
    201,
  );

  const execution = { params: { path: { flow_id: flow.id, execution_id: launched.id } } };
  const deadline = Date.now() + EXECUTION_DEADLINE_MS;
  let current: Execution = launched;
  while (!FINAL.includes(current.status)) {
    if (Date.now() > deadline) throw new Error(`execution ${current.id} still ${current.status}`);
    await sleep(200);
    current = expect(
      "get_execution",
      await api.GET("/flows/{flow_id}/executions/{execution_id}", execution),
      200,
    );
  }
  check(current.status === "succeeded", `execution ended ${current.status}: ${current.error ?? ""}`);
  check(current.summary.nodes_total === 1 && current.summary.passed === 1, "summary");

  const nodes = expect(
    "list_execution_nodes",
    await api.GET("/flows/{flow_id}/executions/{execution_id}/nodes", execution),
    200,
  );
  const [node] = nodes.items;
  check(nodes.items.length === 1 && node !== undefined && node.node_id === "health", "node results");
  check(node.status === "passed" && node.response?.status === 200, `node ${node.status}`);
  check((node.assertions ?? []).every((a) => a.passed), "an assertion failed");

  // --- API keys ------------------------------------------------------------------------------------------------
  const keys = expect("list_api_keys", await api.GET("/api-keys", { params: { query: { limit: 100 } } }), 200);
  check(keys.items.length > 0, "no API keys listed");

  console.log(
    `ts smoke: endpoint ${webhook.id}, ${page.items.length} captures, execution ${current.id} ${current.status}, ` +
      `${keys.items.length} api keys`,
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
