-- +goose Up
-- The audit page's filters by actor and by action (issue 15: "no query
-- whose cost grows with history"): without an index a rare actor or action
-- was a backward walk through the whole trail. Each index ends in id, so a
-- filtered page is read newest first from the index and stops at its
-- limit, like the team and object filters (00002).
CREATE INDEX audit_actor ON audit_events (actor, id);
CREATE INDEX audit_action ON audit_events (action, id);

-- +goose Down
DROP INDEX audit_action;
DROP INDEX audit_actor;
