package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// blockedHost copies a fixture and makes one sysfs attribute a FIFO that
// no one writes: opening it blocks, as a read of a wedged driver's
// attribute does. Cleanup opens the FIFO for writing, which ends the read
// left blocked in this process.
func blockedHost(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "host")
	if out, err := exec.Command("cp", "-a", filepath.Join(hostsDir, "port-down"), root).CombinedOutput(); err != nil {
		t.Fatalf("copy the fixture: %v: %s", err, out)
	}
	dev, err := filepath.EvalSymlinks(filepath.Join(root, "sys", "class", "infiniband", "mlx5_1"))
	if err != nil {
		t.Fatal(err)
	}
	attr := filepath.Join(dev, "ports", "1", "state")
	if err := os.Remove(attr); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(attr, 0o644); err != nil {
		t.Fatalf("mkfifo %s: %v", attr, err)
	}
	t.Cleanup(func() {
		if f, err := os.OpenFile(attr, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	return root
}

// A read that never returns must not hold the run past --timeout: the
// checks are cut, the report goes out without the inventory, and
// `npd --run` answers Unknown before node-problem-detector's 5s timeout.
func TestBlockedReadEndsAtTheDeadline(t *testing.T) {
	root := blockedHost(t)
	for _, tc := range []struct {
		args     []string
		deadline time.Duration
		code     int
		out      string
	}{
		{[]string{"--root", root, "--level", "1", "--format", "json", "--timeout", "1s"}, time.Second, 1, `"exit_code": 1`},
		{[]string{"npd", "--run", "--root", root}, 4 * time.Second, npdUnknown, "unknown: the last run was incomplete (exit 1)"},
	} {
		start := time.Now()
		type result struct {
			code        int
			out, stderr string
		}
		done := make(chan result, 1)
		go func() {
			code, out, stderr := runCLI(t, tc.args...)
			done <- result{code, out, stderr}
		}()
		select {
		case r := <-done:
			took := time.Since(start)
			if r.code != tc.code || !strings.Contains(r.out, tc.out) {
				t.Errorf("%v: exit %d, output %.300q, want exit %d with %q (stderr %s)", tc.args, r.code, r.out, tc.code, tc.out, r.stderr)
			}
			if took > tc.deadline+pastDeadline+500*time.Millisecond {
				t.Errorf("%v: took %v, past its %v deadline", tc.args, took, tc.deadline)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%v: still running after 30s: a blocked read holds the run", tc.args)
		}
	}
}
