-- +goose Up
-- Signals (issue 12): a watched signal that fired (internal/usage
-- SignalStatus firing), listed with its owner until someone with the right
-- acknowledges it with a note. team is '' for the cluster's own signals
-- (capacity, node health). At most one open (unacknowledged) event per
-- team and signal: the evaluator records a firing idempotently.
CREATE TABLE signal_events (
    id              INTEGER PRIMARY KEY,
    team            TEXT NOT NULL,
    signal          TEXT NOT NULL,
    fired_at        TEXT NOT NULL,
    detail          TEXT NOT NULL,
    owner           TEXT NOT NULL,
    response        TEXT NOT NULL,
    acknowledged_by INTEGER REFERENCES users(id),
    acknowledged_at TEXT,
    ack_note        TEXT,
    CHECK ((acknowledged_by IS NULL) = (acknowledged_at IS NULL)),
    CHECK ((acknowledged_at IS NULL) = (ack_note IS NULL)),
    CHECK (ack_note IS NULL OR length(trim(ack_note)) > 0)
);
CREATE UNIQUE INDEX signal_events_open ON signal_events (team, signal) WHERE acknowledged_at IS NULL;
CREATE INDEX signal_events_by_team ON signal_events (team, id);

-- +goose Down
DROP TABLE signal_events;
