package main

import (
	"testing"
	"time"
)

// A report of wrk 4.1.0 (Debian) run with --latency, and its variants: a
// slow page (seconds), a fast one (microseconds), non-2xx answers and
// socket errors, and a run in which nothing was answered.
const wrkReport = `Running 5s test @ http://127.0.0.1:40123/connections
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    12.34ms    4.21ms  95.00ms   88.13%
    Req/Sec     2.61k   532.48     3.02k    60.00%
  Latency Distribution
     50%   11.10ms
     75%   13.07ms
     90%   17.85ms
     99%   28.59ms
  26080 requests in 5.02s, 548.44MB read
Requests/sec:   5195.27
Transfer/sec:    109.25MB
`

func TestParseWrk(t *testing.T) {
	r, err := parseWrk(wrkReport)
	if err != nil {
		t.Fatal(err)
	}
	want := wrkResult{RPS: 5195.27, Mean: 12340 * time.Microsecond, P99: 28590 * time.Microsecond, Requests: 26080}
	if r != want {
		t.Errorf("parseWrk = %+v, want %+v", r, want)
	}

	slow := `Running 5s test @ http://127.0.0.1:40123/audit
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.02s   300.00ms   2.48s    70.00%
    Req/Sec     3.00      2.00     9.00     80.00%
  Latency Distribution
     50%    1.00s 
     75%    1.20s 
     90%    1.90s 
     99%    2.48s 
  40 requests in 5.10s, 1.20MB read
  Socket errors: connect 0, read 0, write 0, timeout 12
  Non-2xx or 3xx responses: 3
Requests/sec:      7.84
Transfer/sec:    240.00KB
`
	r, err = parseWrk(slow)
	if err != nil {
		t.Fatal(err)
	}
	want = wrkResult{RPS: 7.84, Mean: 1020 * time.Millisecond, P99: 2480 * time.Millisecond, Requests: 40, Non2xx: 3,
		Errors: "connect 0, read 0, write 0, timeout 12"}
	if r != want {
		t.Errorf("parseWrk(slow) = %+v, want %+v", r, want)
	}

	none := `Running 2s test @ http://127.0.0.1:43767/teams/team-3/usage
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     0.00us    0.00us   0.00us    -nan%
    Req/Sec     0.00      0.00     0.00      -nan%
  Latency Distribution
     50%    0.00us
     75%    0.00us
     90%    0.00us
     99%    0.00us
  0 requests in 2.10s, 0.00B read
Requests/sec:      0.00
Transfer/sec:       0.00B
`
	if r, err = parseWrk(none); err != nil || r.Requests != 0 || r.RPS != 0 {
		t.Errorf("parseWrk(nothing answered) = %+v, %v; want 0 requests, 0 req/s", r, err)
	}

	// A report without a figure the table needs is an error, never a zero.
	for name, out := range map[string]string{
		"no Requests/sec":         "    Latency    12.34ms    4.21ms  95.00ms   88.13%\n     99%   28.59ms\n  26080 requests in 5.02s, 548.44MB read\n",
		"no 99% (no --latency)":   "    Latency    12.34ms    4.21ms  95.00ms   88.13%\n  26080 requests in 5.02s, 548.44MB read\nRequests/sec:   5195.27\n",
		"no Latency line":         "     99%   28.59ms\n  26080 requests in 5.02s, 548.44MB read\nRequests/sec:   5195.27\n",
		"a unit wrk never prints": "    Latency    12.34ns    4.21ms  95.00ms   88.13%\n     99%   28.59ms\n  26080 requests in 5.02s\nRequests/sec:   5195.27\n",
		"empty":                   "",
	} {
		if r, err := parseWrk(out); err == nil {
			t.Errorf("%s: parseWrk = %+v, want an error", name, r)
		}
	}
}

func TestParseWrkDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"850.00us": 850 * time.Microsecond,
		"12.34ms":  12340 * time.Microsecond,
		"1.02s":    1020 * time.Millisecond,
		"2.50m":    150 * time.Second,
		"1.00h":    time.Hour,
		"0.00us":   0,
	} {
		got, err := parseWrkDuration(in)
		if err != nil || got != want {
			t.Errorf("parseWrkDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "12.34", "ms", "12.34ns", "1,5ms"} {
		if got, err := parseWrkDuration(in); err == nil {
			t.Errorf("parseWrkDuration(%q) = %v, want an error", in, got)
		}
	}
}
