-- +goose Up
-- The last drift check of each provisioned connection: what differs between
-- the cluster and the approved plan (items_json: a JSON array of
-- {kind, ref, what, fields, detail}).
CREATE TABLE drift_reports (
    connection_id INTEGER PRIMARY KEY REFERENCES connections (id),
    checked_at    TEXT NOT NULL,
    items         INTEGER NOT NULL,
    items_json    TEXT NOT NULL DEFAULT '[]',
    error         TEXT NOT NULL DEFAULT ''
);
CREATE INDEX drift_reports_items ON drift_reports (items, connection_id);

-- +goose Down
DROP TABLE drift_reports;
