-- Issue #51, mocks from a collection: the collection an endpoint was made from by `POST /collections/{id}/mock`
-- (its rules answer each operation with its example; a request no rule matches gets 404). A plain id, kept when
-- the collection is deleted later: the endpoint stays a mock.
ALTER TABLE webhooks ADD COLUMN mock_of uuid;
