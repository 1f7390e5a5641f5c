package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/hyperpod-governance/portal/migrations"
)

// The migrated image: a database file with every migration applied, made
// once per process and copied for each new database OpenMigrated creates.
// Running the migrations on every test database costs about 20 ms, but
// about 0.6 s under the race detector (the SQLite engine is Go code, and
// make test runs with -race); hundreds of tests open a fresh database.
var image struct {
	once  sync.Once
	bytes []byte
	err   error
}

// OpenMigrated creates a new database at path (which must not exist) with
// every migration applied, and opens it: the same schema as Open followed
// by Migrate, copied from an image this process migrated once. It is for
// tests and tools that create many databases; the portal itself opens its
// one database with Open and Migrate.
//
// path may also be a PostgreSQL URL naming a database that does not exist
// yet: it is created as a copy (CREATE DATABASE ... TEMPLATE) of a template
// database on the same server, migrated once per schema (see
// createMigratedPostgres).
func OpenMigrated(ctx context.Context, path string) (*DB, error) {
	if isPostgresURL(path) {
		if err := createMigratedPostgres(ctx, path); err != nil {
			return nil, err
		}
		return Open(ctx, path)
	}
	image.once.Do(func() { image.bytes, image.err = migratedImage() })
	if image.err != nil {
		return nil, image.err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("store: create directory for %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store: new database %s: %w", path, err)
	}
	_, werr := f.Write(image.bytes)
	if err := errors.Join(werr, f.Close()); err != nil {
		return nil, fmt.Errorf("store: new database %s: %w", path, err)
	}
	return Open(ctx, path)
}

// migratedImage migrates a database in a temporary directory and returns
// its file, the write-ahead log folded in.
func migratedImage() ([]byte, error) {
	dir, err := os.MkdirTemp("", "portal-image-")
	if err != nil {
		return nil, fmt.Errorf("store: migrated image: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "image.db")
	ctx := context.Background()
	db, err := Open(ctx, path)
	if err != nil {
		return nil, err
	}
	if _, err := db.Migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if _, err := db.sql.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: migrated image: checkpoint: %w", err)
	}
	if err := db.Close(); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}

// createMigratedPostgres creates the database dsn names as a copy of a
// migrated template database, "portal_tmpl_" and a hash of the migrations
// as PostgreSQL runs them, creating and migrating the template first if
// the server has none yet (under an advisory lock, so that concurrent test
// processes create it once). Copying a template costs a few milliseconds;
// migrating costs a second.
func createMigratedPostgres(ctx context.Context, dsn string) error {
	name, admin, err := pgDatabase(dsn)
	if err != nil {
		return err
	}
	fsys, err := dialectFS(dialectPostgres, migrations.FS)
	if err != nil {
		return fmt.Errorf("store: migrations: %w", err)
	}
	h := sha256.New()
	files, _ := fs.Glob(fsys, "*.sql")
	for _, f := range files {
		b, _ := fs.ReadFile(fsys, f)
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
	}
	tmpl := "portal_tmpl_" + hex.EncodeToString(h.Sum(nil))[:16]

	adm, err := openPostgres(ctx, admin)
	if err != nil {
		return fmt.Errorf("store: new database %s: %w", RedactDSN(dsn), err)
	}
	defer adm.Close()
	conn, err := adm.Conn(ctx)
	if err != nil {
		return fmt.Errorf("store: new database %s: %w", RedactDSN(dsn), err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(?)`, templateLockKey); err != nil {
		return fmt.Errorf("store: template lock: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(?)`, templateLockKey) //nolint:errcheck
	var exists bool
	if err := conn.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = ?)`, tmpl).Scan(&exists); err != nil {
		return fmt.Errorf("store: template: %w", err)
	}
	if !exists {
		if err := migrateTemplate(ctx, conn, dsn, tmpl); err != nil {
			return err
		}
	}
	if _, err := conn.ExecContext(ctx, `CREATE DATABASE `+quoteIdent(name)+` TEMPLATE `+quoteIdent(tmpl)); err != nil {
		return fmt.Errorf("store: new database %s: %w", RedactDSN(dsn), err)
	}
	return nil
}

// templateLockKey guards the creation of template databases ("portaltm").
const templateLockKey int64 = 0x706f7274616c746d

func migrateTemplate(ctx context.Context, conn *sql.Conn, dsn, tmpl string) error {
	build := tmpl + "_build"
	if _, err := conn.ExecContext(ctx, `DROP DATABASE IF EXISTS `+quoteIdent(build)+` WITH (FORCE)`); err != nil {
		return fmt.Errorf("store: template: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `CREATE DATABASE `+quoteIdent(build)); err != nil {
		return fmt.Errorf("store: template: %w", err)
	}
	db, err := Open(ctx, withDatabase(dsn, build))
	if err != nil {
		return err
	}
	_, err = db.Migrate(ctx)
	if err := errors.Join(err, db.Close()); err != nil {
		return err
	}
	// Renamed only once migrated: a template that exists is complete.
	if _, err := conn.ExecContext(ctx, `ALTER DATABASE `+quoteIdent(build)+` RENAME TO `+quoteIdent(tmpl)); err != nil {
		return fmt.Errorf("store: template: %w", err)
	}
	return nil
}

// pgDatabase returns the database dsn names and a URL of the same server's
// maintenance database "postgres".
func pgDatabase(dsn string) (name, admin string, err error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", "", fmt.Errorf("store: parse database URL %s: invalid", RedactDSN(dsn))
	}
	name = strings.TrimPrefix(u.Path, "/")
	if name == "" || name == "postgres" {
		return "", "", fmt.Errorf("store: new database %s: name a database to create", RedactDSN(dsn))
	}
	return name, withDatabase(dsn, "postgres"), nil
}

// withDatabase returns the URL dsn with its database replaced by name.
func withDatabase(dsn, name string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	u.Path = "/" + name
	return u.String()
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
