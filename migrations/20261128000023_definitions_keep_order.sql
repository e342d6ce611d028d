-- Flow definitions keep the key order their author wrote (issue #31): a person who writes `id`, `kind`, `request`
-- gets `id`, `kind`, `request` back, not the alphabetical order jsonb stores. The draft and the published versions
-- become `json`, which PostgreSQL keeps as the text it was given (the server writes what serde_json printed of the
-- parsed body, in the body's order). Definitions stored before keep jsonb's order: that order was already lost.
-- The only queries into them (collection references, `api/collections/refs.rs`) use the json operators and
-- functions (`->`, `->>`, `json_array_elements`). Rewrites both tables under an exclusive lock (flows and their
-- versions: small next to captures and executions). During a rolling upgrade a server of the release before keeps
-- working (its jsonb values become json by assignment, in jsonb's order) except where it queries into definitions
-- with jsonb functions: deleting a collection or a collection request answers 500 there until it is replaced.
ALTER TABLE flows ALTER COLUMN definition TYPE json USING definition::json;
ALTER TABLE flow_versions ALTER COLUMN definition TYPE json USING definition::json;
