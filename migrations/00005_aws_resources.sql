-- +goose Up
-- The AWS resources provisioning made for each connection, as the last step
-- that touched them saw them: ids and ARNs for the connection page and for
-- anyone cleaning up by hand. A revoked connection keeps its rows, marked
-- deleted or kept.
CREATE TABLE aws_resources (
    connection_id INTEGER NOT NULL REFERENCES connections (id),
    kind          TEXT NOT NULL,
    name          TEXT NOT NULL,
    resource_id   TEXT NOT NULL DEFAULT '',
    arn           TEXT NOT NULL DEFAULT '',
    version       INTEGER NOT NULL DEFAULT 0,
    action        TEXT NOT NULL,
    job_id        INTEGER NOT NULL REFERENCES jobs (id),
    updated_at    TEXT NOT NULL,
-- +dialect postgres
    -- SQLite's implicit rowid, made explicit: AWSResources lists the rows
    -- in the order they were first recorded (ORDER BY rowid on both).
    rowid         BIGINT GENERATED ALWAYS AS IDENTITY,
-- +dialect end
    PRIMARY KEY (connection_id, kind, name)
);

-- +goose Down
DROP TABLE aws_resources;
