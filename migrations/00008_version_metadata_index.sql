-- +goose Up
-- The history of a connection lists its versions' number, hash, author and
-- time. Those columns come after the body in contract_versions, so reading
-- them from the table walks each body's overflow pages: the cost of a
-- history grew with the size of every version. This index holds them, so
-- the history and the list of a connection's editors never touch a body.
CREATE INDEX contract_versions_meta ON contract_versions (connection_id, version, hash, author_id, created_at);

-- +goose Down
DROP INDEX contract_versions_meta;
