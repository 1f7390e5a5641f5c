-- +goose Up
-- What the read rule of a notice needs (workflow.NoticeScope), kept on the
-- user's notification row: the team it is about ('' for none) and whether
-- it is addressed to its reader by name (workflow.ToPerson). The header's
-- unread count on every page, the list and marking read then stay on the
-- notifications indexes, with no outbox row read per notice.
ALTER TABLE notifications ADD COLUMN team TEXT NOT NULL DEFAULT '';
ALTER TABLE notifications ADD COLUMN personal INTEGER NOT NULL DEFAULT 0;
UPDATE notifications SET
    team = (SELECT o.team FROM outbox o WHERE o.id = notifications.outbox_id),
    personal = (SELECT CASE WHEN o.recipients LIKE 'person:%' THEN 1 ELSE 0 END FROM outbox o WHERE o.id = notifications.outbox_id);

-- +goose Down
ALTER TABLE notifications DROP COLUMN personal;
ALTER TABLE notifications DROP COLUMN team;
