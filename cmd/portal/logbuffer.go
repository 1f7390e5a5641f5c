package main

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// logBuffer is serve's log writer: the lines wait in memory and go to w
// in one write, logFlushEvery after the first of them at the latest, at
// once when logBufferSize bytes wait, after any line at WARN or above
// (flushAbove), and when serve returns (Close). Under load the server
// logs a line per request, and one write per line was about a twentieth
// of a cached page's cost (make bench, issue 33). What a crash can lose
// is the info lines of the last logFlushEvery; Go's own panic report is
// written by the runtime, not through this buffer.
type logBuffer struct {
	mu     sync.Mutex
	w      io.Writer
	buf    []byte      // the lines waiting; the timer is armed while there are any
	timer  *time.Timer // nil until the first line waits
	closed bool        // after Close every line is written at once
}

const (
	logFlushEvery = 100 * time.Millisecond
	logBufferSize = 64 << 10
)

func newLogBuffer(w io.Writer) *logBuffer { return &logBuffer{w: w} }

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return b.w.Write(p)
	}
	first := len(b.buf) == 0
	b.buf = append(b.buf, p...)
	if len(b.buf) >= logBufferSize {
		return len(p), b.flushLocked()
	}
	if first { // arm the timer for the lines that now wait
		if b.timer == nil {
			b.timer = time.AfterFunc(logFlushEvery, func() { _ = b.Flush() })
		} else {
			b.timer.Reset(logFlushEvery)
		}
	}
	return len(p), nil
}

// Flush writes the waiting lines.
func (b *logBuffer) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flushLocked()
}

func (b *logBuffer) flushLocked() error {
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.w.Write(b.buf)
	if cap(b.buf) > 4*logBufferSize {
		b.buf = nil // a burst's buffer is not kept
	} else {
		b.buf = b.buf[:0]
	}
	return err
}

// Close writes the waiting lines; later lines are written at once.
func (b *logBuffer) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	if b.timer != nil {
		b.timer.Stop()
	}
	return b.flushLocked()
}

// flushAbove is a handler that flushes its logBuffer after each record at
// or above level, so that warnings and errors are never held back.
type flushAbove struct {
	slog.Handler
	buf   *logBuffer
	level slog.Level
}

func (h flushAbove) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= h.level {
		if ferr := h.buf.Flush(); err == nil {
			err = ferr
		}
	}
	return err
}

func (h flushAbove) WithAttrs(as []slog.Attr) slog.Handler {
	return flushAbove{h.Handler.WithAttrs(as), h.buf, h.level}
}

func (h flushAbove) WithGroup(name string) slog.Handler {
	return flushAbove{h.Handler.WithGroup(name), h.buf, h.level}
}
