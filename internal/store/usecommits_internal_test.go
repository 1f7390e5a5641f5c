package store

import (
	"context"
	"testing"
	"time"
)

// TestUseCommitsWaitForTheBatch: while a batch of uses commits, a version
// that is neither mapped nor the batch's first waits for the batch to end
// and then stands for what the batch mapped it to (it is the batch's own
// commit, read before the batch could map it); the batch's first version
// and any version while no batch commits never wait; a failed batch maps
// nothing; an old mapping is dropped, never wrong.
func TestUseCommitsWaitForTheBatch(t *testing.T) {
	var u useCommits
	ctx := t.Context()
	if got := u.content(ctx, "v1"); got != "v1" {
		t.Fatalf("no batch: %q", got)
	}
	u.begin("v1")
	if got := u.content(ctx, "v1"); got != "v1" {
		t.Errorf("the batch's first version: %q", got)
	}
	got := make(chan string)
	go func() { got <- u.content(ctx, "v2") }()
	select {
	case g := <-got:
		t.Fatalf("the batch's commit was answered %q before the batch ended", g)
	case <-time.After(50 * time.Millisecond):
	}
	u.end("v2")
	if g := <-got; g != "v1" {
		t.Errorf("the batch's commit, read before the batch ended, stands for %q, want v1", g)
	}
	// A second batch from v2 (which stands for v1) maps v3 to v1 too; a
	// failed one maps nothing.
	u.begin("v2")
	u.end("v3")
	u.begin("v3")
	u.end("")
	for raw, want := range map[string]string{"v2": "v1", "v3": "v1", "v4": "v4"} {
		if g := u.content(ctx, raw); g != want {
			t.Errorf("%s stands for %q, want %q", raw, g, want)
		}
	}
	// A reader whose context ends stops waiting and keeps its version.
	u.begin("v3")
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if g := u.content(short, "v5"); g != "v5" {
		t.Errorf("a reader that gave up: %q", g)
	}
	u.end("v5")
	for i := range useCommitsKept + 1 {
		u.begin("v1")
		u.end("x" + string(rune('a'+i%26)) + string(rune('a'+i/26)))
	}
	if g := u.content(ctx, "v2"); g != "v2" || len(u.to) != useCommitsKept {
		t.Errorf("after %d more batches the oldest mapping is %q and %d are kept, want it dropped and %d kept", useCommitsKept+1, g, len(u.to), useCommitsKept)
	}
}
