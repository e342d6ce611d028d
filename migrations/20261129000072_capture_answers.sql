-- How capture URLs answer (#51, part A). `rules`: the endpoint's response rules as written (a JSON array, or NULL);
-- `rule_conditions`: each rule's `q` and `filter` compiled to the capture search's condition rows (one array per
-- rule, written with `rules`), so the capture path weighs them without parsing; `cors`: the CORS settings or NULL.
ALTER TABLE webhooks
    ADD COLUMN rules jsonb,
    ADD COLUMN rule_conditions jsonb,
    ADD COLUMN cors jsonb;
