-- +goose Up
-- When a user's groups were last confirmed (their last sign-in, or a group
-- re-check of their session), and their user name in the organisation's
-- directory. Notice delivery (internal/notify) sends a team's notices only
-- to users whose membership it can confirm at delivery (the directory when
-- one is configured) or whose groups were confirmed within a session's
-- lifetime: an owner moved out of the team who never signs in again no
-- longer receives its notices (issue 32 item 1). Existing users were last
-- confirmed at their last sign-in.
ALTER TABLE users ADD COLUMN groups_checked_at TEXT NOT NULL DEFAULT '';
ALTER TABLE users ADD COLUMN dir_name TEXT NOT NULL DEFAULT '';
UPDATE users SET groups_checked_at = last_login_at;

-- +goose Down
ALTER TABLE users DROP COLUMN dir_name;
ALTER TABLE users DROP COLUMN groups_checked_at;
