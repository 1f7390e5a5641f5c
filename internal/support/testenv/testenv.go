// Package testenv lets tests that need the test bed (kube-apiserver, Dex,
// Chromium) find it through environment variables written by `make test`.
//
// Without the test bed a plain `go test ./...` skips those tests with a
// message naming `make test`; with PORTAL_TESTBED_REQUIRED=1 (set by
// `make test` and therefore by CI) a missing variable fails the test instead,
// so CI can never pass by skipping. RequestCounter counts a Kubernetes
// client's requests and writes, for the provisioner's zero-write checks.
// PostgresDB gives a test a database of its own on the test bed's PostgreSQL.
// It must not import any portal package.
package testenv

import (
	"bytes"
	"os"
	"sync"
	"testing"
)

// Require returns the value of the environment variable name, which the test
// bed sets. When it is unset the test is skipped, or failed when the test bed
// is required.
func Require(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v != "" {
		return v
	}
	if os.Getenv("PORTAL_TESTBED_REQUIRED") == "1" {
		t.Fatalf("%s is not set although PORTAL_TESTBED_REQUIRED=1: the test bed did not start; run `make test`", name)
	}
	t.Skipf("needs the test bed (%s unset): run `make test`, which builds and starts it", name)
	return ""
}

// Buffer is a bytes.Buffer safe for one goroutine writing (a logger, a
// child process) while the test reads.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
