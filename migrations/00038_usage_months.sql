-- +goose Up
-- Each usage line's UTC calendar month: usage_hours summed per team,
-- namespace, instance type, source and month, kept by triggers in the
-- statement that changes an hourly row, as usage_days (00025) is per day.
-- The chargeback's summed read (store.DB.CostInputSummed) takes a span's
-- whole months from here, the whole days around them from usage_days and
-- the hours of its partial first and last days from usage_hours: a closed
-- month at 1,000 teams (every statement, the month's closing, make bench's
-- "month's chargeback at 1,000 teams < 100 ms") is 1,000 rows instead of
-- 30,000 day rows summed and sorted (122 ms a call on SQLite with
-- usage_days' covering index, 00037).
-- month is the month's first midnight in the store's time layout
-- (store.fmtTime), so it compares with the span's bounds as text; hours
-- counts the hourly rows summed, and a month whose last hour is deleted is
-- deleted. WITHOUT ROWID on SQLite: the rows are kept in key order, so a
-- month is one range of the table (PostgreSQL drops the clause).
CREATE TABLE usage_months (
    team            TEXT NOT NULL,
    namespace       TEXT NOT NULL,
    instance_type   TEXT NOT NULL,
    source          TEXT NOT NULL,
    month           TEXT NOT NULL,
    hours           INTEGER NOT NULL,
    guaranteed_accel_s INTEGER NOT NULL,
    borrowed_accel_s   INTEGER NOT NULL,
    cpu_milli_s     INTEGER NOT NULL,
    memory_mib_s    INTEGER NOT NULL,
    PRIMARY KEY (month, team, namespace, instance_type, source)
) WITHOUT ROWID;
INSERT INTO usage_months (team, namespace, instance_type, source, month, hours, guaranteed_accel_s, borrowed_accel_s, cpu_milli_s, memory_mib_s)
SELECT team, namespace, instance_type, source, substr(hour, 1, 7) || '-01T00:00:00.000000000Z', COUNT(*),
       SUM(guaranteed_accel_s), SUM(borrowed_accel_s), SUM(cpu_milli_s), SUM(memory_mib_s)
FROM usage_hours GROUP BY team, namespace, instance_type, source, substr(hour, 1, 7);
-- +dialect sqlite
-- Row triggers. An UPDATE (an upsert's replacement included) takes the old
-- row out of its month and adds the new one.
-- +goose StatementBegin
CREATE TRIGGER usage_months_ins AFTER INSERT ON usage_hours
BEGIN
    INSERT INTO usage_months (team, namespace, instance_type, source, month, hours, guaranteed_accel_s, borrowed_accel_s, cpu_milli_s, memory_mib_s)
    VALUES (NEW.team, NEW.namespace, NEW.instance_type, NEW.source, substr(NEW.hour, 1, 7) || '-01T00:00:00.000000000Z', 1,
            NEW.guaranteed_accel_s, NEW.borrowed_accel_s, NEW.cpu_milli_s, NEW.memory_mib_s)
    ON CONFLICT (month, team, namespace, instance_type, source) DO UPDATE SET hours = hours + 1,
        guaranteed_accel_s = guaranteed_accel_s + excluded.guaranteed_accel_s, borrowed_accel_s = borrowed_accel_s + excluded.borrowed_accel_s,
        cpu_milli_s = cpu_milli_s + excluded.cpu_milli_s, memory_mib_s = memory_mib_s + excluded.memory_mib_s;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER usage_months_del AFTER DELETE ON usage_hours
BEGIN
    UPDATE usage_months SET hours = hours - 1, guaranteed_accel_s = guaranteed_accel_s - OLD.guaranteed_accel_s,
        borrowed_accel_s = borrowed_accel_s - OLD.borrowed_accel_s, cpu_milli_s = cpu_milli_s - OLD.cpu_milli_s,
        memory_mib_s = memory_mib_s - OLD.memory_mib_s
    WHERE month = substr(OLD.hour, 1, 7) || '-01T00:00:00.000000000Z' AND team = OLD.team AND namespace = OLD.namespace
      AND instance_type = OLD.instance_type AND source = OLD.source;
    DELETE FROM usage_months WHERE month = substr(OLD.hour, 1, 7) || '-01T00:00:00.000000000Z' AND team = OLD.team
      AND namespace = OLD.namespace AND instance_type = OLD.instance_type AND source = OLD.source AND hours = 0;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER usage_months_upd AFTER UPDATE ON usage_hours
BEGIN
    UPDATE usage_months SET hours = hours - 1, guaranteed_accel_s = guaranteed_accel_s - OLD.guaranteed_accel_s,
        borrowed_accel_s = borrowed_accel_s - OLD.borrowed_accel_s, cpu_milli_s = cpu_milli_s - OLD.cpu_milli_s,
        memory_mib_s = memory_mib_s - OLD.memory_mib_s
    WHERE month = substr(OLD.hour, 1, 7) || '-01T00:00:00.000000000Z' AND team = OLD.team AND namespace = OLD.namespace
      AND instance_type = OLD.instance_type AND source = OLD.source;
    DELETE FROM usage_months WHERE month = substr(OLD.hour, 1, 7) || '-01T00:00:00.000000000Z' AND team = OLD.team
      AND namespace = OLD.namespace AND instance_type = OLD.instance_type AND source = OLD.source AND hours = 0;
    INSERT INTO usage_months (team, namespace, instance_type, source, month, hours, guaranteed_accel_s, borrowed_accel_s, cpu_milli_s, memory_mib_s)
    VALUES (NEW.team, NEW.namespace, NEW.instance_type, NEW.source, substr(NEW.hour, 1, 7) || '-01T00:00:00.000000000Z', 1,
            NEW.guaranteed_accel_s, NEW.borrowed_accel_s, NEW.cpu_milli_s, NEW.memory_mib_s)
    ON CONFLICT (month, team, namespace, instance_type, source) DO UPDATE SET hours = hours + 1,
        guaranteed_accel_s = guaranteed_accel_s + excluded.guaranteed_accel_s, borrowed_accel_s = borrowed_accel_s + excluded.borrowed_accel_s,
        cpu_milli_s = cpu_milli_s + excluded.cpu_milli_s, memory_mib_s = memory_mib_s + excluded.memory_mib_s;
END;
-- +goose StatementEnd
-- +dialect postgres
-- Row triggers as on SQLite, in one function; TRUNCATE empties the months
-- (a statement trigger: TRUNCATE fires no row trigger). The data version
-- trigger every table carries (migration 00024) is added here too.
-- +goose StatementBegin
CREATE FUNCTION portal_usage_months() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM usage_months;
        RETURN NULL;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE usage_months SET hours = hours - 1, guaranteed_accel_s = guaranteed_accel_s - OLD.guaranteed_accel_s,
            borrowed_accel_s = borrowed_accel_s - OLD.borrowed_accel_s, cpu_milli_s = cpu_milli_s - OLD.cpu_milli_s,
            memory_mib_s = memory_mib_s - OLD.memory_mib_s
        WHERE month = substr(OLD.hour, 1, 7) || '-01T00:00:00.000000000Z' AND team = OLD.team AND namespace = OLD.namespace
          AND instance_type = OLD.instance_type AND source = OLD.source;
        DELETE FROM usage_months WHERE month = substr(OLD.hour, 1, 7) || '-01T00:00:00.000000000Z' AND team = OLD.team
          AND namespace = OLD.namespace AND instance_type = OLD.instance_type AND source = OLD.source AND hours = 0;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO usage_months AS d (team, namespace, instance_type, source, month, hours, guaranteed_accel_s, borrowed_accel_s, cpu_milli_s, memory_mib_s)
        VALUES (NEW.team, NEW.namespace, NEW.instance_type, NEW.source, substr(NEW.hour, 1, 7) || '-01T00:00:00.000000000Z', 1,
                NEW.guaranteed_accel_s, NEW.borrowed_accel_s, NEW.cpu_milli_s, NEW.memory_mib_s)
        ON CONFLICT (month, team, namespace, instance_type, source) DO UPDATE SET hours = d.hours + 1,
            guaranteed_accel_s = d.guaranteed_accel_s + excluded.guaranteed_accel_s, borrowed_accel_s = d.borrowed_accel_s + excluded.borrowed_accel_s,
            cpu_milli_s = d.cpu_milli_s + excluded.cpu_milli_s, memory_mib_s = d.memory_mib_s + excluded.memory_mib_s;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER usage_months_rows AFTER INSERT OR UPDATE OR DELETE ON usage_hours
FOR EACH ROW EXECUTE FUNCTION portal_usage_months();
CREATE TRIGGER usage_months_truncate AFTER TRUNCATE ON usage_hours
FOR EACH STATEMENT EXECUTE FUNCTION portal_usage_months();
CREATE TRIGGER portal_data_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON usage_months
FOR EACH STATEMENT EXECUTE FUNCTION portal_data_changed();
-- +dialect end

-- +goose Down
-- +dialect sqlite
DROP TRIGGER usage_months_ins;
DROP TRIGGER usage_months_del;
DROP TRIGGER usage_months_upd;
-- +dialect postgres
DROP TRIGGER usage_months_rows ON usage_hours;
DROP TRIGGER usage_months_truncate ON usage_hours;
DROP FUNCTION portal_usage_months();
-- +dialect end
DROP TABLE usage_months;
