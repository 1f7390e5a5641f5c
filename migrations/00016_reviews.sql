-- +goose Up
-- Lifecycle reviews (issue 13).
--   connections.review_due: the civil date (YYYY-MM-DD) the next scheduled
--     review of a live connection is due; '' until the scheduler or a
--     review's decision sets it (workflow.NextReviewDue).
--   reviews: one row per review of a connection's approved version. At most
--     one open review per connection. The evidence the portal collected
--     when the review opened is frozen with it (evidence, evidence_hash:
--     hex sha256 of the evidence bytes) and never rewritten: later changes
--     do not rewrite what the reviewer saw. A decision is recorded once.
--     more_triggers lists, one per line, the triggers that fired while the
--     review was already open (the only column that grows while open).
--   connections.orphan: why a live connection is an orphan (no business
--     purpose, or no owner who is still a portal user in the team's owners
--     group), as the review scheduler last found it; '' when it is not.
ALTER TABLE connections ADD COLUMN review_due TEXT NOT NULL DEFAULT '';
ALTER TABLE connections ADD COLUMN orphan TEXT NOT NULL DEFAULT '';
CREATE TABLE reviews (
    id            INTEGER PRIMARY KEY,
    connection_id INTEGER NOT NULL REFERENCES connections (id),
    team          TEXT NOT NULL,
    version       INTEGER NOT NULL,
    trigger       TEXT NOT NULL CHECK (trigger IN ('scheduled', 'end_date', 'amendment', 'capacity', 'orchestrator',
                                                    'owner_left', 'signal', 'orphan')),
    detail        TEXT NOT NULL,
    due_on        TEXT NOT NULL CHECK (due_on GLOB '[0-9][0-9][0-9][0-9]-[0-1][0-9]-[0-3][0-9]'),
    opened_at     TEXT NOT NULL,
    evidence      TEXT NOT NULL,
    evidence_hash TEXT NOT NULL,
    more_triggers TEXT NOT NULL DEFAULT '',
    demo          INTEGER NOT NULL DEFAULT 0 CHECK (demo IN (0, 1)),
    decision      TEXT NOT NULL DEFAULT '' CHECK (decision IN ('', 'renew', 'request_changes', 'hold', 'recommend_revocation')),
    reason        TEXT NOT NULL DEFAULT '',
    deadline      TEXT NOT NULL DEFAULT '',
    decided_by    INTEGER REFERENCES users (id),
    decided_at    TEXT NOT NULL DEFAULT '',
    CHECK ((decision = '') = (decided_by IS NULL)),
    CHECK ((decision = '') = (decided_at = '')),
    CHECK (decision = '' OR length(trim(reason)) > 0),
    CHECK ((decision = 'request_changes') = (deadline <> '')),
    FOREIGN KEY (connection_id, version) REFERENCES contract_versions (connection_id, version)
);
CREATE UNIQUE INDEX reviews_one_open ON reviews (connection_id) WHERE decision = '';
CREATE INDEX reviews_queue ON reviews (due_on, id) WHERE decision = '';
CREATE INDEX reviews_by_connection ON reviews (connection_id, id);
-- Frozen: what was collected, and a decision once taken.
-- +dialect sqlite
CREATE TRIGGER reviews_frozen BEFORE UPDATE ON reviews
WHEN OLD.decision <> ''
  OR NEW.evidence IS NOT OLD.evidence OR NEW.evidence_hash IS NOT OLD.evidence_hash
  OR NEW.connection_id IS NOT OLD.connection_id OR NEW.version IS NOT OLD.version
  OR NEW.trigger IS NOT OLD.trigger OR NEW.detail IS NOT OLD.detail OR NEW.due_on IS NOT OLD.due_on
  OR NEW.opened_at IS NOT OLD.opened_at OR NEW.team IS NOT OLD.team OR NEW.demo IS NOT OLD.demo
BEGIN SELECT RAISE(ABORT, 'a review''s evidence and decision are frozen'); END;
CREATE TRIGGER reviews_no_delete BEFORE DELETE ON reviews
BEGIN SELECT RAISE(ABORT, 'reviews are kept'); END;
-- +dialect postgres
CREATE TRIGGER reviews_frozen BEFORE UPDATE ON reviews FOR EACH ROW
WHEN (OLD.decision <> ''
  OR NEW.evidence IS DISTINCT FROM OLD.evidence OR NEW.evidence_hash IS DISTINCT FROM OLD.evidence_hash
  OR NEW.connection_id IS DISTINCT FROM OLD.connection_id OR NEW.version IS DISTINCT FROM OLD.version
  OR NEW.trigger IS DISTINCT FROM OLD.trigger OR NEW.detail IS DISTINCT FROM OLD.detail OR NEW.due_on IS DISTINCT FROM OLD.due_on
  OR NEW.opened_at IS DISTINCT FROM OLD.opened_at OR NEW.team IS DISTINCT FROM OLD.team OR NEW.demo IS DISTINCT FROM OLD.demo)
EXECUTE FUNCTION portal_refuse('a review''s evidence and decision are frozen');
CREATE TRIGGER reviews_no_delete BEFORE DELETE ON reviews FOR EACH ROW
EXECUTE FUNCTION portal_refuse('reviews are kept');
-- +dialect end

-- +goose Down
DROP TABLE reviews;
ALTER TABLE connections DROP COLUMN orphan;
ALTER TABLE connections DROP COLUMN review_due;
