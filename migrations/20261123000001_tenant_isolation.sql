-- Tenant isolation: which organizations may reach private networks from the server, where secrets may go, and
-- the variables of an execution kept by layer.

-- The operator's allow-list: flows of these organizations run by the embedded runner (and their webhook
-- replays and OpenAPI imports by URL) may reach loopback and private addresses. Link-local and cloud metadata
-- addresses stay out of reach for every organization. An installation upgraded from before the list existed
-- keeps its first organization (the one its first start created) on it.
ALTER TABLE organizations ADD COLUMN private_network boolean NOT NULL DEFAULT false;
UPDATE organizations SET private_network = true
WHERE id = (SELECT id FROM organizations ORDER BY created_at, id LIMIT 1);

-- Hosts a secret may be sent to (empty: only hosts the stored flow and its environment name; `*.example.com`
-- covers subdomains), and whether claims of ephemeral runs (the CLI) may carry it at all.
ALTER TABLE secrets
    ADD COLUMN allowed_hosts text[] NOT NULL DEFAULT '{}',
    ADD COLUMN runners_only boolean NOT NULL DEFAULT false;

-- `{base, environment, launch}`: the variables of `variables` by where they came from, so a claim can tell the
-- launch's plain values from the environment's templates. NULL for executions created before this.
ALTER TABLE executions ADD COLUMN variable_layers jsonb;
