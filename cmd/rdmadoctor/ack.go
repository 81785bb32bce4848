package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/report/state"
)

const ackHelp = `usage: rdmadoctor ack CHECK [--unit UNIT] --reason TEXT [--state FILE] [--root DIR]

Accept a check's present level as its new baseline, recorded in the kept
state with the time and the reason; reports show it. For counters.errors:
the error counters' present values, on one unit (mlx5_0/1, mlx5_0/device),
one device (mlx5_0) or every unit; later runs judge their rise from there.
For pcie.aer, link.phy and ib.far_end: a failure they still hold (waiting
for clean runs) ends, on one hop (its PCI address), netdev or InfiniBand
neighbour's port (GUID:port, e.g. 0x0002c90300beef00:17), or every one; a
rise after the ack fails again.

  --unit UNIT     the unit to acknowledge (default: every unit of the check)
  --reason TEXT   why this level is accepted (required: it is shown in reports)
  --state FILE    the state a run keeps with --state (default ` + DefaultStatePath + `)
  --root DIR      read this host directory or snapshot instead of the live host
`

// ackLockWait is how long ack waits for a run holding the state's lock: a
// level-1 run takes seconds, and an operator's ack should not fail for it.
const ackLockWait = 10 * time.Second

// cmdAck is `rdmadoctor ack`.
func cmdAck(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("ack", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	unit := fs.String("unit", "", "")
	reason := fs.String("reason", "", "")
	statePath := fs.String("state", DefaultStatePath, "")
	root := fs.String("root", "/", "")
	usage := func(msg string) int {
		fmt.Fprintf(stderr, "rdmadoctor ack: %s\n%s", msg, ackHelp)
		return report.ExitUsage
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprint(stdout, ackHelp)
			return 0
		}
		return usage(flagError(err, fs))
	}
	id, err := ackCheckID(fs.Args())
	if err != nil {
		return usage(err.Error())
	}
	if strings.TrimSpace(*reason) == "" {
		return usage("--reason is required: say why this level is accepted")
	}
	if *statePath == "" {
		return usage("--state \"\": name the state file a run keeps with --state (default /var/lib/rdmadoctor/state.json)")
	}
	return runAck(ackRequest{check: id, unit: *unit, reason: asciiLine(*reason, 200), state: *statePath, root: *root}, stdout, stderr)
}

// ackCheckID reads the one check named: a check of the catalog that takes
// acks.
func ackCheckID(args []string) (string, error) {
	if len(args) != 1 {
		return "", fmt.Errorf("name one check to acknowledge (checks that take acks: %s)", strings.Join(checks.AckableChecks, ", "))
	}
	c, ok := checks.Lookup(args[0])
	if !ok {
		return "", fmt.Errorf("unknown check %q; valid checks: %s", args[0], strings.Join(checks.IDs(), ", "))
	}
	for _, id := range checks.AckableChecks {
		if c.ID == id {
			return id, nil
		}
	}
	return "", fmt.Errorf("%s takes no ack: it judges no level that can be accepted (checks that take acks: %s)", c.ID, strings.Join(checks.AckableChecks, ", "))
}

type ackRequest struct{ check, unit, reason, state, root string }

// runAck takes the state's lock as a run does, reads the state (a missing
// or corrupt one is refused: there is nothing to accept a level in), reads
// the counters (counters.errors) or clears the held failures (pcie.aer,
// link.phy, ib.far_end), records the ack and saves.
func runAck(req ackRequest, stdout, stderr io.Writer) int {
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "rdmadoctor ack: %v\n", err)
		return code
	}
	lock, err := lockWithin(lockPathFor(req.state), ackLockWait)
	if err != nil {
		if busyExit(err) == ExitBusy {
			return fail(ExitBusy, fmt.Errorf("%v (waited %v)", err, ackLockWait))
		}
		return fail(report.ExitInternal, err)
	}
	defer lock.release()
	if lock.note != "" {
		fmt.Fprintf(stderr, "rdmadoctor ack: %s\n", lock.note)
	}
	st, err := state.Load(req.state)
	if err != nil {
		return fail(report.ExitInternal, fmt.Errorf("%w (acks are kept in the state a run with --state writes: run once with --state first)", err))
	}
	line, err := ackInState(req, st)
	var unknown *checks.UnknownUnitError
	var badRoot ackRootError
	switch {
	case errors.As(err, &unknown), errors.As(err, &badRoot):
		return fail(report.ExitUsage, err)
	case err != nil:
		return fail(report.ExitInternal, err)
	}
	if err := st.Save(req.state); err != nil {
		return fail(report.ExitInternal, err)
	}
	fmt.Fprintln(stdout, line)
	return 0
}

// ackRootError is a --root that could not be opened: a usage error.
type ackRootError struct{ error }

// ackInState records the ack in st: counters.errors reads the host's
// counters for their level; a check that holds failures clears them from
// the state alone. It returns the line that says what was done.
func ackInState(req ackRequest, st *state.State) (string, error) {
	if checks.AcksByHold(req.check) {
		res, err := checks.AckRises(st, req.check, req.unit, req.reason, time.Now())
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("acknowledged %s on %s: %d held failure(s) cleared; later runs judge new rises only; reason: %s",
			req.check, strings.Join(res.Units, ", "), res.Counters, req.reason), nil
	}
	host, cleanup, err := openRoot(req.root)
	if err != nil {
		return "", ackRootError{err}
	}
	defer cleanup()
	res, err := checks.AckCounters(host, st, req.unit, req.reason, time.Now())
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("acknowledged %s on %s: %d error counter(s) take their present values as the new baseline; reason: %s",
		req.check, strings.Join(res.Units, ", "), res.Counters, req.reason), nil
}

// lockWithin retries the run lock for up to wait: the lock is
// non-blocking, and a run holds it only for its own length.
func lockWithin(path string, wait time.Duration) (*runLock, error) {
	deadline := time.Now().Add(wait)
	for {
		l, err := acquireLock(path)
		// Only another run of ours is waited for: a foreign holder is no
		// run that ends.
		if err == nil || busyExit(err) != ExitBusy || time.Now().After(deadline) {
			return l, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
