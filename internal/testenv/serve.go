package testenv

import (
	"bufio"
	"io"
	"os/exec"
	"regexp"
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
	Out    *Buffer       // stdout and stderr
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
	s := &Serve{Cmd: cmd, Out: &Buffer{}, Exited: make(chan struct{}), t: t}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = s.Out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
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
	t.Cleanup(s.Stop)
	select {
	case s.URL = <-urls:
	case <-s.Exited:
		t.Fatalf("portal serve ended before it was ready:\n%s", s.Out.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("portal serve printed no ready line:\n%s", s.Out.String())
	}
	return s
}

// Stop sends SIGTERM and waits for the process to end, failing the test
// when it does not end cleanly (exit status 0) within 30 s. A process that
// already ended (killed by the test) is left alone. Stop runs once.
func (s *Serve) Stop() {
	s.once.Do(func() {
		select {
		case <-s.Exited:
			return
		default:
		}
		_ = s.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.Exited:
			if !s.Cmd.ProcessState.Success() {
				s.t.Errorf("portal serve did not stop cleanly: %s\n%s", s.Cmd.ProcessState, s.Out.String())
			}
		case <-time.After(30 * time.Second):
			_ = s.Cmd.Process.Kill()
			s.t.Errorf("portal serve did not stop within 30s of SIGTERM\n%s", s.Out.String())
		}
	})
}
