-- +goose Up
-- Each team's guarantee over time (issue 38): from from_at on, until the
-- team's next row for the instance type, the team is guaranteed count
-- instances of it. The store's apply adds a row, in the transaction that
-- changes team_capacity, each time a team's guarantee in force changes (a
-- new connection approved, an amendment applied on the cluster, a
-- revocation done), so that the collector splits each second of usage by
-- the guarantee in force at that second, the chargeback weighs each
-- guarantee for the time it was in force, and a change never moves a past
-- figure. The guarantees in force when this migration runs have no known
-- start: they are recorded as in force since the earliest time.
CREATE TABLE team_guarantee_history (
    team          TEXT NOT NULL,
    instance_type TEXT NOT NULL,
    from_at       TEXT NOT NULL,
    count         INTEGER NOT NULL,
    PRIMARY KEY (team, instance_type, from_at)
);
INSERT INTO team_guarantee_history (team, instance_type, from_at, count)
SELECT team, instance_type, '0001-01-01T00:00:00.000000000Z', count FROM team_capacity;
-- It is a chargeback's input: a change moves the cost input version
-- (migration 00022), and, on PostgreSQL, the data version (00024).
-- +dialect sqlite
CREATE TRIGGER team_guarantee_history_cost_ins AFTER INSERT ON team_guarantee_history
BEGIN UPDATE cost_input_version SET version = version + 1 WHERE id = 1; END;
CREATE TRIGGER team_guarantee_history_cost_upd AFTER UPDATE ON team_guarantee_history
BEGIN UPDATE cost_input_version SET version = version + 1 WHERE id = 1; END;
CREATE TRIGGER team_guarantee_history_cost_del AFTER DELETE ON team_guarantee_history
BEGIN UPDATE cost_input_version SET version = version + 1 WHERE id = 1; END;
-- +dialect postgres
CREATE TRIGGER team_guarantee_history_cost AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON team_guarantee_history
FOR EACH STATEMENT EXECUTE FUNCTION portal_cost_input_changed();
CREATE TRIGGER portal_data_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON team_guarantee_history
FOR EACH STATEMENT EXECUTE FUNCTION portal_data_changed();
-- +dialect end

-- +goose Down
DROP TABLE team_guarantee_history;
