package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

// fileLocker is goose's session locker for SQLite: an exclusive flock on a
// file beside the database, held while goose migrates. flock locks are
// independent of the POSIX locks SQLite takes on the database itself, and
// the kernel drops them when the process dies.
type fileLocker struct {
	path string
	mu   sync.Mutex
	f    *os.File
}

func (l *fileLocker) SessionLock(ctx context.Context, _ *sql.Conn) error {
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return fmt.Errorf("migration lock %s: %w", l.path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return fmt.Errorf("migration lock %s: %w", l.path, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	l.mu.Lock()
	l.f = f
	l.mu.Unlock()
	return nil
}

func (l *fileLocker) SessionUnlock(context.Context, *sql.Conn) error {
	l.mu.Lock()
	f := l.f
	l.f = nil
	l.mu.Unlock()
	if f == nil {
		return nil
	}
	return f.Close() // closing the last descriptor releases the flock
}
