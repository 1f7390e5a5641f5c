-- +goose Up
-- The audit page's verification checkpoint (issue 14), shared by every
-- replica: how far the hash chain has been verified (the last verified
-- event, its hash, how many events up to it) and when. A replica's audit
-- page verifies only what was appended after it, and moves it forward,
-- never back; a second replica neither starts over nor trusts a checkpoint
-- of its own. One row per checkpoint name ('audit-page').
CREATE TABLE audit_checkpoint (
    name        TEXT PRIMARY KEY,
    event_id    INTEGER NOT NULL,
    hash        TEXT NOT NULL,
    event_count INTEGER NOT NULL,
    verified_at TEXT NOT NULL
);

-- +goose Down
DROP TABLE audit_checkpoint;
