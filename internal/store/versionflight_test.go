package store

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"
)

// A data-version read is shared only by callers that arrived before it
// started: a caller arriving while a read runs waits for the next one
// (which all such callers share), so no caller gets a version read
// before it asked (the page and session caches would serve data older
// than the request).
func TestVersionFlightsNeverHandOutAnOlderRead(t *testing.T) {
	started := make(chan int, 10)
	release := make(chan struct{}, 10)
	var mu sync.Mutex
	n := 0
	f := &versionFlights{query: func(ctx context.Context) (string, error) {
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		started <- i
		<-release
		return strconv.Itoa(i), nil
	}}
	ctx := context.Background()
	type res struct {
		token string
		err   error
	}
	call := func() chan res {
		ch := make(chan res, 1)
		go func() { tok, err := f.read(ctx); ch <- res{tok, err} }()
		return ch
	}
	first := call()
	if i := <-started; i != 1 {
		t.Fatalf("read %d started first", i)
	}
	// Read 1 is on its way: these three arrive after it started.
	late := []chan res{call(), call(), call()}
	waitFor(t, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.calls == 4 })
	release <- struct{}{}
	if r := <-first; r.token != "1" || r.err != nil {
		t.Fatalf("the first caller got %+v, want read 1", r)
	}
	select {
	case i := <-started:
		if i != 2 {
			t.Fatalf("read %d started second", i)
		}
		release <- struct{}{}
	case <-time.After(5 * time.Second):
		t.Error("no second read started for the callers that arrived while the first ran")
	}
	for k, ch := range late {
		if r := <-ch; r.token != "2" || r.err != nil {
			t.Errorf("caller %d, arrived while read 1 ran, got %+v; want read 2 (a read started after it arrived)", k, r)
		}
	}
	f.mu.Lock()
	reads := f.reads
	f.mu.Unlock()
	if reads != 2 {
		t.Errorf("%d reads for four callers, want 2 (the three late ones share one)", reads)
	}

	// A caller whose context ends stops waiting; the read goes on for
	// the others.
	cctx, cancel := context.WithCancel(ctx)
	gone := make(chan error, 1)
	go func() { _, err := f.read(cctx); gone <- err }()
	<-started
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled caller got %v", err)
	}
	other := call()
	release <- struct{}{}
	<-started
	release <- struct{}{}
	if r := <-other; r.token != "4" {
		t.Errorf("the next caller got %+v, want read 4", r)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("timed out waiting")
}

// With a gap, a read starts no sooner than gap after the last one
// started, and the callers that arrive meanwhile share it; each still
// gets a read that started after it asked.
func TestVersionFlightsGap(t *testing.T) {
	const gap = 200 * time.Millisecond
	var mu sync.Mutex
	var starts []time.Time
	f := &versionFlights{gap: gap, query: func(context.Context) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		starts = append(starts, time.Now())
		return strconv.Itoa(len(starts)), nil
	}}
	ctx := context.Background()
	// The first read starts no sooner than first (the flights take its
	// start time just before calling query, which records its own a
	// little later: under -race that little was enough for starts[0] to
	// be later than the flights' start, so the two starts the query saw
	// could be a hair under gap apart although the flights kept it).
	first := time.Now()
	if tok, err := f.read(ctx); tok != "1" || err != nil {
		t.Fatalf("first read: %q %v", tok, err)
	}
	asked := time.Now()
	var wg sync.WaitGroup
	toks := make([]string, 5)
	for i := range toks {
		wg.Add(1)
		go func() { defer wg.Done(); toks[i], _ = f.read(ctx) }()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for i, tok := range toks {
		if tok != "2" {
			t.Errorf("caller %d got read %q, want 2 (the five share the read after the gap)", i, tok)
		}
	}
	if len(starts) != 2 {
		t.Fatalf("%d reads, want 2", len(starts))
	}
	if d := starts[1].Sub(first); d < gap {
		t.Errorf("the second read started %v after the first was asked for, want at least %v", d, gap)
	}
	if starts[1].Before(asked) {
		t.Error("the callers got a read that started before they asked")
	}
}
