// Command testbedutil holds the small helpers hack/testbed/dex.sh needs
// that a fresh Debian does not ship (no htpasswd, no python):
//
//	testbedutil freeport [N]      print N (default 1) distinct free 127.0.0.1 TCP ports, one per line
//	testbedutilreturn fmt.Errorf("usage: testbedutil freeport [N] | bcrypt PASSWORD | secret [BYTES] | waithttp URL SECS")  print a bcrypt hash (cost 10) of PASSWORD
//	testbedutil secret [BYTES]    print a random URL-safe secret (default 32 bytes)
//	testbedutil waithttp URL SECS wait until GET URL answers 200 (exit 1 on timeout)
package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"golang.org/x/crypto/bcrypt"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "testbedutil:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: testbedutil freeport [N] | bcrypt PASSWORD | secret [BYTES]")
	}
	switch args[0] {
	case "freeport":
		n := 1
		if len(args) > 1 {
			v, err := strconv.Atoi(args[1])
			if err != nil || v < 1 || v > 64 {
				return fmt.Errorf("freeport: bad count %q", args[1])
			}
			n = v
		}
		// Keep every listener open until all ports are chosen so the
		// kernel never hands out the same port twice.
		var ls []net.Listener
		defer func() {
			for _, l := range ls {
				l.Close()
			}
		}()
		for i := 0; i < n; i++ {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return fmt.Errorf("freeport: %w", err)
			}
			ls = append(ls, l)
			fmt.Println(l.Addr().(*net.TCPAddr).Port)
		}
		return nil
	case "bcrypt":
		if len(args) != 2 || args[1] == "" {
			return fmt.Errorf("usage: testbedutil bcrypt PASSWORD")
		}
		h, err := bcrypt.GenerateFromPassword([]byte(args[1]), bcrypt.DefaultCost)
		if err != nil {
			return err
		}
		fmt.Println(string(h))
		return nil
	case "secret":
		n := 32
		if len(args) > 1 {
			v, err := strconv.Atoi(args[1])
			if err != nil || v < 8 || v > 1024 {
				return fmt.Errorf("secret: bad byte count %q", args[1])
			}
			n = v
		}
		b := make([]byte, n)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		fmt.Println(base64.RawURLEncoding.EncodeToString(b))
		return nil
	case "waithttp":
		if len(args) != 3 {
			return fmt.Errorf("usage: testbedutil waithttp URL SECS")
		}
		secs, err := strconv.Atoi(args[2])
		if err != nil || secs < 1 {
			return fmt.Errorf("waithttp: bad timeout %q", args[2])
		}
		return waitHTTP(args[1], time.Duration(secs)*time.Second)
	default:
		return fmt.Errorf("unknown subcommand %q", args[0])
	}
}

// waitHTTP polls url until it answers 200 OK or the timeout passes.
func waitHTTP(url string, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	var last string
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waithttp: %s not ready after %s (last: %s)", url, timeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
