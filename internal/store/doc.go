// Package store is the portal's only SQL: database/sql on SQLite
// (modernc.org/sqlite: WAL, foreign keys, busy timeout) or on PostgreSQL
// (github.com/jackc/pgx/v5), chosen by Open from the --db value (a file path
// or a postgres:// URL), the embedded migrations, and one file per table.
// Functions take ctx first, wrap errors with a "store: <op>:" prefix and
// return ErrNotFound rather than (nil, nil).
//
// Two engines, one SQL: queries are written once with ? placeholders
// (rebound to $N on PostgreSQL) and ask the dialect (dialect.go) for the
// little that differs; the migrations are one set of files, filtered per
// engine (migratefs.go). Write transactions (inTx) are serialized across
// processes on both engines: BEGIN IMMEDIATE on SQLite, an advisory lock
// taken first on PostgreSQL. On SQLite a checkpointer goroutine copies
// the WAL into the database file beside the writers (checkpoint.go), so
// that no commit waits for a checkpoint's fsyncs but the rare backstop's.
//
// One writer: the connections table is written by apply (apply.go) alone,
// the jobs table by the functions of apply_jobs.go alone and the reviews
// table by recordReview (apply_reviews.go) alone: apply calls them for what
// an effect queues, cancels, opens, decides or notes, and the job methods
// call apply_jobs.go's for the worker's bookkeeping (claim, lease, an
// attempt's plan, retry, outcome) after workflow.Job.CheckLease. Every
// method that changes a connection opens one write transaction, loads the
// connection and the facts its rule needs, calls the workflow command that
// decides (workflow.Approve, Edit, OnJobCompleted, OnReviewEvent,
// EndDateReached, ...), and hands the effect to apply, which records the
// row, the version, the decision, the jobs, the review, the audit events
// and the notification outbox in that transaction. The store decides
// nothing: no rule on a state is written here, only the reads of the facts
// a command needs and the recording of what it decided.
//
// Two versions tell the caches what changed (read each before the data kept
// under it): DataVersion moves with every commit (dataversion.go), and
// ContentVersion with every commit but those that only record personal
// API tokens' uses (contentversion.go, uses.go), so that the API's cached
// list and its token lookups outlive the uses every API request records.
//
// It may import internal/workflow and internal/usage for domain types; it must never import
// internal/web, internal/views, internal/provision or any HTTP, Kubernetes or
// AWS package.
package store
