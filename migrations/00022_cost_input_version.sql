-- +goose Up
-- A version of everything the month-to-date chargeback is computed from
-- (issue 15): the usage rows, the cluster's capacity rows, the missing data
-- periods, the teams' guarantees in force and the cost policy. Triggers
-- bump it in the transaction that changes any of them, whoever writes (the
-- collector, apply, finance's policy choice, a test writing rows directly),
-- so a replica's cached chargeback (internal/web, monthSoFar) is reused only
-- while the version it was computed at is still the one in the database:
-- one primary-key read per view instead of the whole installation's month.
CREATE TABLE cost_input_version (
    id      INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);
INSERT INTO cost_input_version (id, version) VALUES (1, 1);
-- +dialect sqlite
CREATE TRIGGER usage_hours_cost_ins AFTER INSERT ON usage_hours
BEGIN UPDATE cost_input_version SET version = version + 1 WHERE id = 1; END;
CREATE TRIGGER usage_hours_cost_upd AFTER UPDATE ON usage_hours
BEGIN UPDATE cost_input_version SET version = version + 1 WHERE id = 1; END;
CREATE TRIGGER usage_hours_cost_del AFTER DELETE ON usage_hours
BEGIN UPDATE cost_input_version SET version = version + 1 WHERE id = 1; END;
CREATE TRIGGER usage_cluster_hours_cost_ins AFTER INSERT ON usage_cluster_hours
BEGIN UPDATE cost_input_version SET version = version + 1 WHERE id = 1; END;
CREATE TRIGGER usage_cluster_hours_cost_upd AFTER UPDATE ON usage_cluster_hours
BEGIN UPDATE cost_input_version SET version = version + 1 WHERE id = 1; END;
CREATE TRIGGER usage_cluster_hours_cost_del AFTER DELETE ON usage_cluster_hours
BEGIN UPDATE cost_input_version SET version = version + 1 WHERE id = 1; END;
CREATE TRIGGER usage_missing_cost_ins AFTER INSERT ON usage_missing
BEGIN UPDATE cost_input_version SET version = version + 1 WHERE id = 1; END;
CREATE TRIGGER usage_missing_cost_upd AFTER UPDATE ON usage_missing
BEGIN UPDATE cost_input_version SET version = version + 1 WHERE id = 1; END;
CREATE TRIGGER usage_missing_cost_del AFTER DELETE ON usage_missing
BEGIN UPDATE cost_input_version SET version = version + 1 WHERE id = 1; END;
CREATE TRIGGER team_capacity_cost_ins AFTER INSERT ON team_capacity
BEGIN UPDATE cost_input_version SET version = version + 1 WHERE id = 1; END;
CREATE TRIGGER team_capacity_cost_upd AFTER UPDATE ON team_capacity
BEGIN UPDATE cost_input_version SET version = version + 1 WHERE id = 1; END;
CREATE TRIGGER team_capacity_cost_del AFTER DELETE ON team_capacity
BEGIN UPDATE cost_input_version SET version = version + 1 WHERE id = 1; END;
CREATE TRIGGER cost_policies_cost_ins AFTER INSERT ON cost_policies
BEGIN UPDATE cost_input_version SET version = version + 1 WHERE id = 1; END;
-- +dialect postgres
-- Statement triggers (SQLite has only row triggers): one bump per
-- statement, TRUNCATE included.
-- +goose StatementBegin
CREATE FUNCTION portal_cost_input_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE cost_input_version SET version = version + 1 WHERE id = 1;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER usage_hours_cost AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON usage_hours
FOR EACH STATEMENT EXECUTE FUNCTION portal_cost_input_changed();
CREATE TRIGGER usage_cluster_hours_cost AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON usage_cluster_hours
FOR EACH STATEMENT EXECUTE FUNCTION portal_cost_input_changed();
CREATE TRIGGER usage_missing_cost AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON usage_missing
FOR EACH STATEMENT EXECUTE FUNCTION portal_cost_input_changed();
CREATE TRIGGER team_capacity_cost AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON team_capacity
FOR EACH STATEMENT EXECUTE FUNCTION portal_cost_input_changed();
CREATE TRIGGER cost_policies_cost AFTER INSERT ON cost_policies
FOR EACH STATEMENT EXECUTE FUNCTION portal_cost_input_changed();
-- +dialect end

-- +goose Down
-- +dialect sqlite
DROP TRIGGER usage_hours_cost_ins;
DROP TRIGGER usage_hours_cost_upd;
DROP TRIGGER usage_hours_cost_del;
DROP TRIGGER usage_cluster_hours_cost_ins;
DROP TRIGGER usage_cluster_hours_cost_upd;
DROP TRIGGER usage_cluster_hours_cost_del;
DROP TRIGGER usage_missing_cost_ins;
DROP TRIGGER usage_missing_cost_upd;
DROP TRIGGER usage_missing_cost_del;
DROP TRIGGER team_capacity_cost_ins;
DROP TRIGGER team_capacity_cost_upd;
DROP TRIGGER team_capacity_cost_del;
DROP TRIGGER cost_policies_cost_ins;
-- +dialect postgres
DROP TRIGGER usage_hours_cost ON usage_hours;
DROP TRIGGER usage_cluster_hours_cost ON usage_cluster_hours;
DROP TRIGGER usage_missing_cost ON usage_missing;
DROP TRIGGER team_capacity_cost ON team_capacity;
DROP TRIGGER cost_policies_cost ON cost_policies;
DROP FUNCTION portal_cost_input_changed();
-- +dialect end
DROP TABLE cost_input_version;
