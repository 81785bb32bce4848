package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal: the side a program writes to, as its
// stdout on a terminal, and the side that reads what it wrote.
func openPTY(t *testing.T) (term, reader *os.File) {
	t.Helper()
	reader, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	fd := int(reader.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		reader.Close()
		t.Skipf("unlock the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		reader.Close()
		t.Skipf("pseudo-terminal number: %v", err)
	}
	term, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		reader.Close()
		t.Skipf("open /dev/pts/%d: %v", n, err)
	}
	t.Cleanup(func() { term.Close(); reader.Close() })
	return term, reader
}

// runOnTerminal runs the CLI with a terminal as its stdout and returns what
// reached the terminal.
func runOnTerminal(t *testing.T, args ...string) string {
	t.Helper()
	term, reader := openPTY(t)
	got := make(chan string)
	go func() {
		var b bytes.Buffer
		io.Copy(&b, reader) // ends with EIO once the terminal side is closed
		got <- b.String()
	}()
	var errOut bytes.Buffer
	code := run(args, term, &errOut)
	term.Close()
	out := <-got
	if code != 19 {
		t.Fatalf("%v: exit %d, want 19 (port.state); stderr %q", args, code, errOut.String())
	}
	return out
}

// The text report is coloured on a terminal, and never with --no-color,
// NO_COLOR set (to anything, https://no-color.org) or TERM=dumb.
func TestNoColor(t *testing.T) {
	t.Setenv("TERM", "xterm")
	t.Setenv("NO_COLOR", "")
	os.Unsetenv("NO_COLOR")
	args := []string{"--root", hostsDir + "/port-down", "--level", "1"}
	if out := runOnTerminal(t, args...); !strings.Contains(out, "\x1b[") {
		t.Fatalf("no colour on a terminal:\n%q", out)
	}
	for _, c := range []struct {
		name, env, value string
		flag             []string
	}{
		{"--no-color", "", "", []string{"--no-color"}},
		{"NO_COLOR=1", "NO_COLOR", "1", nil},
		{"NO_COLOR=0", "NO_COLOR", "0", nil}, // any value counts
		{"TERM=dumb", "TERM", "dumb", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.env != "" {
				t.Setenv(c.env, c.value)
			}
			out := runOnTerminal(t, append(args, c.flag...)...)
			if strings.Contains(out, "\x1b") {
				t.Errorf("an escape sequence reached the terminal:\n%q", out)
			}
			if !strings.Contains(out, "port.state") {
				t.Errorf("the report did not reach the terminal:\n%q", out)
			}
		})
	}
}
