package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hyperpod-governance/portal/internal/support/testenv"
)

// TestLogBuffer: info lines wait (at most logFlushEvery), a warning
// brings them and itself out at once, a full buffer is written, Close
// writes what waits, and lines after Close are written at once.
func TestLogBuffer(t *testing.T) {
	var out testenv.Buffer
	b := newLogBuffer(&out)
	log := newLogger(Config{LogLevel: "info", LogFormat: "text"}, b)
	log.Info("request", "n", 1)
	if s := out.String(); s != "" {
		t.Fatalf("an info line was written at once: %q", s)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "n=1") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "n=1") {
		t.Fatalf("an info line waited past %v: %q", logFlushEvery, out.String())
	}

	log.Info("request", "n", 2)
	log.Warn("data version unavailable")
	if s := out.String(); !strings.Contains(s, "n=2") || !strings.Contains(s, "data version unavailable") {
		t.Errorf("a warning did not bring out itself and the line before it: %q", s)
	}
	log.With("route", "/").Error("failed") // WithAttrs keeps the flush
	if s := out.String(); !strings.Contains(s, "failed") {
		t.Errorf("an error line waited: %q", s)
	}

	before := len(out.String())
	line := strings.Repeat("x", 1000)
	for range logBufferSize/1000 + 1 {
		log.Info(line)
	}
	if len(out.String()) == before {
		t.Errorf("%d bytes waited: a full buffer was not written", logBufferSize+1000)
	}

	log.Info("last before close", "n", 3)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "n=3") {
		t.Errorf("Close did not write the waiting line")
	}
	log.Info("after close", "n", 4)
	if !strings.Contains(out.String(), "n=4") {
		t.Errorf("a line after Close waited")
	}
	if got := slog.LevelWarn; got != log.Handler().(flushAbove).level {
		t.Errorf("flush level %v, want %v", log.Handler().(flushAbove).level, got)
	}
}
