-- The OpenAPI description a collection was imported from (or last synced with), as JSON: `matchesSchema`
-- assertions name a schema in it (`{"$ref": "collection:<id>#/components/schemas/Pet"}`), which a launch inlines
-- into the job so runners need nothing more from the server.
CREATE TABLE collection_documents (
    collection_id   uuid PRIMARY KEY REFERENCES collections (id) ON DELETE CASCADE,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    document        jsonb NOT NULL,
    updated_at      timestamptz NOT NULL DEFAULT now()
);
