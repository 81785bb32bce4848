package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/rdmadoctor/rdmadoctor/report/adapter"
)

// reasonPrefix and maxReasonLen are the adapter's: the prefix that marks a
// reason rdmadoctor set, and the reason's length bound.
const (
	reasonPrefix = adapter.SlurmReasonPrefix
	maxReasonLen = adapter.SlurmMaxReason
)

// scontrolDirs are searched, in order, for scontrol: a health check and a
// prolog run with no PATH.
var scontrolDirs = []string{"/usr/bin", "/usr/local/bin", "/opt/slurm/bin"}

// findScontrol returns the scontrol to run: the one given (absolute, an
// executable file), else the first executable in scontrolDirs.
func findScontrol(given string) (string, error) {
	if given != "" {
		if !filepath.IsAbs(given) {
			return "", fmt.Errorf("--scontrol %q: give an absolute path (slurmd runs its programs with no PATH)", given)
		}
		if err := executable(given); err != nil {
			return "", fmt.Errorf("--scontrol: %w", err)
		}
		return given, nil
	}
	for _, d := range scontrolDirs {
		p := filepath.Join(d, "scontrol")
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no executable scontrol in %s; give its path with --scontrol", strings.Join(scontrolDirs, ", "))
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", p)
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s: not executable", p)
	}
	return nil
}

// validNodeName accepts what a Slurm node name is in practice (a host name):
// letters, digits, '.', '_' and '-'. Anything else — spaces, '=', quotes, a
// hostlist's brackets — would change the meaning of the scontrol argument.
// Compiled on first use: its {0,63} unrolls into hundreds of instructions.
var validNodeName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`) })

// slurmReason is the adapter's drain reason.
func slurmReason(id string, code int, summary string) string {
	return adapter.SlurmReason(id, code, summary)
}

// nodeInfo is what `scontrol show node <name>` says of the node: its State=
// value split on '+', and its Reason= text without the "[user@time]" Slurm
// appends.
type nodeInfo struct {
	State  string
	Tokens []string // upper case, without the '*', '~', '#', … suffixes sinfo-style output carries
	Reason string
}

var reasonStamp = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(` \[[^\[\]@]*@[^\[\]]*\]$`) })

// parseShowNode reads the multi-line `scontrol show node NAME` output
// (slurm_sprint_node_table in Slurm's src/api/node_info.c): "State=" starts a
// field of its line, "Reason=" starts its own line and runs to the end of it,
// followed by " [user@time]" when Slurm recorded who set it.
func parseShowNode(out []byte, name string) (nodeInfo, error) {
	var n nodeInfo
	foundName, foundState := false, false
	for _, line := range strings.Split(string(out), "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "NodeName=") {
			if foundName {
				return n, fmt.Errorf("scontrol show node %s printed more than one node", name)
			}
			got, _, _ := strings.Cut(strings.TrimPrefix(t, "NodeName="), " ")
			if got != name {
				return n, fmt.Errorf("scontrol show node %s printed node %q", name, got)
			}
			foundName = true
			continue
		}
		if strings.HasPrefix(t, "Reason=") && n.Reason == "" {
			n.Reason = reasonStamp().ReplaceAllString(strings.TrimPrefix(t, "Reason="), "")
			continue
		}
		for _, f := range strings.Fields(t) {
			if v, ok := strings.CutPrefix(f, "State="); ok && !foundState {
				n.State, foundState = v, true
			}
		}
	}
	if !foundName || !foundState || n.State == "" {
		return n, fmt.Errorf("scontrol show node %s: no NodeName= and State= in its output: %q", name, clip(string(out), 200))
	}
	for _, tok := range strings.Split(n.State, "+") {
		tok = strings.ToUpper(strings.TrimRight(tok, "*~#!%$@^-"))
		if tok != "" {
			n.Tokens = append(n.Tokens, tok)
		}
	}
	return n, nil
}

// Node state words, as Slurm prints them (node_state_string_complete in
// src/common/slurm_protocol_defs.c; older releases print DRAINED, DRAINING,
// MAINT and REBOOT as words of their own).
var (
	drainWords = map[string]bool{"DRAIN": true, "DRAINED": true, "DRAINING": true}
	// okWords are the states a health check may drain or resume in.
	okWords = map[string]bool{
		"IDLE": true, "ALLOCATED": true, "ALLOC": true, "MIXED": true, "COMPLETING": true,
		"RESERVED": true, "RESV": true, "CLOUD": true, "DYNAMIC_NORM": true, "NOT_RESPONDING": true,
		"BLOCKED": true, "PLANNED": true, "DRAIN": true, "DRAINED": true, "DRAINING": true,
	}
)

// drained tells whether the node carries the DRAIN flag.
func (n nodeInfo) drained() bool {
	for _, t := range n.Tokens {
		if drainWords[t] {
			return true
		}
	}
	return false
}

// handsOff names the first state word that puts the node out of our reach:
// DOWN, MAINTENANCE, REBOOT_*, FAIL, POWER*, FUTURE, UNKNOWN, INVAL — and any
// word this version does not know, since guessing about a state is how a
// health check fights an administrator. "" when the node may be touched.
func (n nodeInfo) handsOff() string {
	for _, t := range n.Tokens {
		if !okWords[t] {
			return t
		}
	}
	return ""
}

// ours tells whether the node's reason is one rdmadoctor set.
func (n nodeInfo) ours() bool { return strings.HasPrefix(n.Reason, reasonPrefix) }

// scontrol runs the scontrol binary at path with argv vectors (never a shell),
// each call under its own deadline.
type scontrol struct {
	path    string
	timeout time.Duration
}

// run runs one scontrol command and returns its standard output. The
// process group is killed at the deadline, so a hung scontrol (or anything
// it started) cannot hold the run past its budget.
func (s scontrol) run(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.path, args...)
	cmd.Env = os.Environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 500 * time.Millisecond
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s: killed after %v: %w", shellLine(s.path, args), s.timeout, ctx.Err())
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(stdout.String())
		}
		if msg == "" {
			msg = "(no output)"
		}
		return nil, fmt.Errorf("%s: %v: %s", shellLine(s.path, args), err, clip(msg, 200))
	}
	return stdout.Bytes(), nil
}

func (s scontrol) show(ctx context.Context, node string) (nodeInfo, error) {
	out, err := s.run(ctx, showArgs(node)...)
	if err != nil {
		return nodeInfo{}, err
	}
	return parseShowNode(out, node)
}

func showArgs(node string) []string { return []string{"show", "node", node} }

func drainArgs(node, reason string) []string {
	return []string{"update", "nodename=" + node, "state=drain", "reason=" + reason}
}

func resumeArgs(node string) []string {
	return []string{"update", "nodename=" + node, "state=resume"}
}

// shellLine writes a command as a shell would need it typed: each argument
// quoted when it holds anything but safe characters.
func shellLine(path string, args []string) string {
	words := []string{shellQuote(path)}
	for _, a := range args {
		words = append(words, shellQuote(a))
	}
	return strings.Join(words, " ")
}

var shellSafe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_./=:,+@%-]+$`) })

func shellQuote(s string) string {
	if shellSafe().MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// clip shortens s to n bytes on a rune boundary, printable on one line.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
