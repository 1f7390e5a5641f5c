-- +goose Up
-- Amendments (issue 11): a live connection's change request.
--   connections.amendment: where the change is ('' none, draft, submitted,
--     changes_requested, approved: its job applying it, failed: the job gave
--     up). The connection's state stays what it is (active, under_review);
--     approved_version moves only when the amendment's job succeeds.
--   jobs.from_version: for an 'amend' job, the approved version it replaces
--     (what the new plan no longer contains is removed); 0 otherwise.
--   review_triggers: an approved amendment that changes owners, roles,
--     account, region, data classification or monitored signals calls for an
--     event-driven review; the reviews issue acts on these rows.
ALTER TABLE connections ADD COLUMN amendment TEXT NOT NULL DEFAULT ''
    CHECK (amendment IN ('', 'draft', 'submitted', 'changes_requested', 'approved', 'failed'));
ALTER TABLE jobs ADD COLUMN from_version INTEGER NOT NULL DEFAULT 0;
CREATE TABLE review_triggers (
    id            INTEGER PRIMARY KEY,
    connection_id INTEGER NOT NULL REFERENCES connections (id),
    version       INTEGER NOT NULL,
    fields        TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    resolved_at   TEXT NOT NULL DEFAULT '',
    FOREIGN KEY (connection_id, version) REFERENCES contract_versions (connection_id, version)
);
CREATE INDEX review_triggers_open ON review_triggers (connection_id) WHERE resolved_at = '';
-- The admin queue lists submitted requests and submitted changes, the
-- longest waiting first: one partial index in that order (the query repeats
-- this WHERE literally, so that SQLite may use it).
CREATE INDEX connections_waiting ON connections (submitted_at, id) WHERE state = 'submitted' OR amendment = 'submitted';

-- +goose Down
DROP INDEX connections_waiting;
DROP TABLE review_triggers;
ALTER TABLE jobs DROP COLUMN from_version;
ALTER TABLE connections DROP COLUMN amendment;
