package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSummarizeRefusesFilesThatAreNotRegular: a FIFO planted under a
// report's name in a fleet directory, and a character device named on the
// command line, are each named as not regular and not read; summarize
// returns at once (before, open(2) of the FIFO waited for a writer for
// ever) and still summarises the real report beside them.
func TestSummarizeRefusesFilesThatAreNotRegular(t *testing.T) {
	dir := t.TempDir()
	writeFixtureReports(t, dir, "cx5-roce-healthy")
	fifo := filepath.Join(dir, "node9.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("cannot make a FIFO here: %v", err)
	}
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errOut := runCLI(t, "summarize", dir, "/dev/zero")
		done <- result{code, out, errOut}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		// Release the reader left blocked in open(2), then fail.
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		t.Fatal("summarize is still blocked on the FIFO after 10s")
	}
	if r.code != 1 {
		t.Errorf("exit %d, want 1 (files unreadable); stderr %s", r.code, r.err)
	}
	for _, want := range []string{
		fifo + ": not a regular file (a FIFO): not read",
		"/dev/zero: not a regular file (a character device): not read",
		"1 report(s) of 1 host(s), 2 file(s) unreadable",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
}
