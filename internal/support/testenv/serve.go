package testenv

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// readyRE matches the line `portal serve` prints once it listens.
var readyRE = regexp.MustCompile(`ready: open (http://[0-9.:]+)/`)

// Serve is a running `portal serve` process started by StartServe.
type Serve struct {
	URL    string
	Cmd    *exec.Cmd
	Out    *Buffer       // stdout, and stderr unless the caller set cmd.Stderr
	Exited chan struct{} // closed once the process has ended
	t      testing.TB
	once   sync.Once
}

// StartServe starts cmd, a `portal serve` command the caller built (its
// arguments, directory, environment, credentials), and waits for the line
// saying where it listens. When the test ends, a process still running is
// stopped as Stop does. The waits are failsafes against a hung process,
// not speed figures.
func StartServe(t testing.TB, cmd *exec.Cmd) *Serve {
	t.Helper()
	s, err := LaunchServe(cmd, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s.t = t
	t.Cleanup(s.Stop)
	return s
}

// LaunchServe is StartServe outside a test (the load programs of bench/):
// it starts cmd and waits up to wait for its ready line; the caller stops
// the process (Terminate). Its stderr (the request log) goes to cmd.Stderr
// when the caller set it (a load program's file: kept in this process's
// memory, hundreds of megabytes of request log grew a buffer whose copies
// stalled the reading, and so the portal's writes and its requests),
// else to Out.
func LaunchServe(cmd *exec.Cmd, wait time.Duration) (*Serve, error) {
	s := &Serve{Cmd: cmd, Out: &Buffer{}, Exited: make(chan struct{})}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if cmd.Stderr == nil {
		cmd.Stderr = s.Out
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %v", cmd.Path, err)
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			s.Out.Write([]byte(sc.Text() + "\n"))
			if m := readyRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		close(s.Exited)
	}()
	select {
	case s.URL = <-urls:
		return s, nil
	case <-s.Exited:
		return nil, fmt.Errorf("portal serve ended before it was ready:\n%s", s.Out.String())
	case <-time.After(wait):
		_ = s.Terminate()
		return nil, fmt.Errorf("portal serve printed no ready line:\n%s", s.Out.String())
	}
}

// Terminate sends SIGTERM and waits for the process to end, killing it
// after 30 s; it says when the process did not end cleanly (exit status 0).
// A process that already ended is left alone.
func (s *Serve) Terminate() error {
	select {
	case <-s.Exited:
		return nil
	default:
	}
	_ = s.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.Exited:
		if !s.Cmd.ProcessState.Success() {
			return fmt.Errorf("portal serve did not stop cleanly: %s\n%s", s.Cmd.ProcessState, s.Out.String())
		}
		return nil
	case <-time.After(30 * time.Second):
		_ = s.Cmd.Process.Kill()
		<-s.Exited
		return fmt.Errorf("portal serve did not stop within 30s of SIGTERM\n%s", s.Out.String())
	}
}

// Stop is Terminate failing the test on its error. Stop runs once. When the
// test has failed, it logs the portal's last lines (its request log: each
// request's route, status and duration_ms), so that a failure seen once in
// CI, a browser's wait that timed out say, shows what the portal was doing.
func (s *Serve) Stop() {
	s.once.Do(func() {
		if err := s.Terminate(); err != nil {
			s.t.Error(err) // the error carries the whole output
			return
		}
		if s.t.Failed() {
			s.t.Logf("the test failed: the portal's last %d log lines:\n%s", tailLines, Tail(s.Out.String(), tailLines))
		}
	})
}

// tailLines is how many of a failed test's portal log lines Stop logs.
const tailLines = 120

// Tail is the last n lines of s.
func Tail(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			if n--; n == 0 {
				return s[i+1:]
			}
		}
	}
	return s
}
