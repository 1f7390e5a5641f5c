-- +goose Up
-- Cost (issue 12): the shared-cost policies finance chooses, versioned and
-- append-only (who chose, when and why; each choice is also an audit event),
-- and the monthly statements frozen when a month closes. A frozen statement
-- is never changed: its canonical JSON's SHA-256 is in the audit trail, and
-- the triggers below refuse UPDATE and DELETE as they do for the audit
-- trail. The current month is never stored: it is computed on each read.
CREATE TABLE cost_policies (
    version      INTEGER PRIMARY KEY,
    method       TEXT NOT NULL CHECK (method IN ('guarantee', 'usage', 'even', 'unallocated')),
    overhead_bp  INTEGER NOT NULL CHECK (overhead_bp BETWEEN 0 AND 10000),
    chosen_by_id INTEGER REFERENCES users (id),
    chosen_by    TEXT NOT NULL,
    chosen_at    TEXT NOT NULL,
    reason       TEXT NOT NULL CHECK (trim(reason) <> '')
);
-- +dialect sqlite
CREATE TRIGGER cost_policies_no_update BEFORE UPDATE ON cost_policies
BEGIN SELECT RAISE(ABORT, 'cost policy versions are immutable'); END;
CREATE TRIGGER cost_policies_no_delete BEFORE DELETE ON cost_policies
BEGIN SELECT RAISE(ABORT, 'cost policy versions are immutable'); END;
-- +dialect postgres
CREATE TRIGGER cost_policies_no_update BEFORE UPDATE ON cost_policies FOR EACH ROW
EXECUTE FUNCTION portal_refuse('cost policy versions are immutable');
CREATE TRIGGER cost_policies_no_delete BEFORE DELETE ON cost_policies FOR EACH ROW
EXECUTE FUNCTION portal_refuse('cost policy versions are immutable');
-- +dialect end

-- One row per closed month: closing is done once.
CREATE TABLE cost_months (
    month          TEXT PRIMARY KEY CHECK (month GLOB '[0-9][0-9][0-9][0-9]-[0-1][0-9]'),
    closed_at      TEXT NOT NULL,
    policy_version INTEGER REFERENCES cost_policies (version),
    currency       TEXT NOT NULL
);
-- +dialect sqlite
CREATE TRIGGER cost_months_no_update BEFORE UPDATE ON cost_months
BEGIN SELECT RAISE(ABORT, 'closed months are immutable'); END;
CREATE TRIGGER cost_months_no_delete BEFORE DELETE ON cost_months
BEGIN SELECT RAISE(ABORT, 'closed months are immutable'); END;
-- +dialect postgres
CREATE TRIGGER cost_months_no_update BEFORE UPDATE ON cost_months FOR EACH ROW
EXECUTE FUNCTION portal_refuse('closed months are immutable');
CREATE TRIGGER cost_months_no_delete BEFORE DELETE ON cost_months FOR EACH ROW
EXECUTE FUNCTION portal_refuse('closed months are immutable');
-- +dialect end

CREATE TABLE cost_statements (
    month   TEXT NOT NULL REFERENCES cost_months (month),
    team    TEXT NOT NULL,
    total   TEXT NOT NULL,
    body    TEXT NOT NULL,
    hash    TEXT NOT NULL,
    PRIMARY KEY (team, month)
);
CREATE INDEX cost_statements_by_month ON cost_statements (month, team);
-- +dialect sqlite
CREATE TRIGGER cost_statements_no_update BEFORE UPDATE ON cost_statements
BEGIN SELECT RAISE(ABORT, 'frozen statements are immutable'); END;
CREATE TRIGGER cost_statements_no_delete BEFORE DELETE ON cost_statements
BEGIN SELECT RAISE(ABORT, 'frozen statements are immutable'); END;
-- +dialect postgres
CREATE TRIGGER cost_statements_no_update BEFORE UPDATE ON cost_statements FOR EACH ROW
EXECUTE FUNCTION portal_refuse('frozen statements are immutable');
CREATE TRIGGER cost_statements_no_delete BEFORE DELETE ON cost_statements FOR EACH ROW
EXECUTE FUNCTION portal_refuse('frozen statements are immutable');
-- +dialect end

-- +goose Down
DROP TABLE cost_statements;
DROP TABLE cost_months;
DROP TABLE cost_policies;
