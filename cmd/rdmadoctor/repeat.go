package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rdmadoctor/rdmadoctor/report"
)

// diagnose runs the checks once — or, with --repeat, again and again until
// SIGTERM, SIGINT or SIGHUP — holding the state's lock (--state FILE locks
// FILE.lock) for each run.
func diagnose(args []string, stdout, stderr io.Writer) int {
	f, err := parseFlags(args)
	if err != nil || f.showVersion || (f.fleet.repeat == 0 && f.fleet.state == "") {
		return diagnoseOnce(args, stdout, stderr)
	}
	if f.fleet.repeat == 0 {
		return lockedRun(f, args, stdout, stderr)
	}
	return repeatRuns(f, args, stdout, stderr)
}

// diagnoseOnce is one run: the report, and one line on stderr for an error.
func diagnoseOnce(args []string, stdout, stderr io.Writer) int {
	code, err := cmdDiagnose(args, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "rdmadoctor: %v\n", err)
	}
	return code
}

// lockedRun is one run under the lock beside --state; a run that finds it
// held by another run says so and exits ExitBusy at once.
func lockedRun(f *flags, args []string, stdout, stderr io.Writer) int {
	if f.fleet.state == "" {
		return diagnoseOnce(args, stdout, stderr)
	}
	if err := ensureDir(f.fleet.state); err != nil {
		fmt.Fprintf(stderr, "rdmadoctor: --state: %v\n", err)
		return report.ExitInternal
	}
	lock, err := acquireLock(lockPathFor(f.fleet.state))
	if err != nil {
		// Another run of ours is "not now" (3); a foreign holder, an unsafe
		// directory or a planted file is a run that could not run (1).
		fmt.Fprintf(stderr, "rdmadoctor: --state: %v\n", err)
		return busyExit(err)
	}
	defer lock.release()
	if lock.note != "" {
		fmt.Fprintf(stderr, "rdmadoctor: --state: %s\n", lock.note)
	}
	return diagnoseOnce(args, stdout, stderr)
}

// repeatRuns runs until a signal: the signal ends the run in progress (its
// partial report replaces neither --output nor --state) and the loop, and
// the process exits 0 — a DaemonSet's pod being stopped is no failure.
func repeatRuns(f *flags, args []string, stdout, stderr io.Writer) int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt, syscall.SIGHUP)
	defer signal.Stop(sigs)
	for {
		select {
		case s := <-sigs:
			return stopped(stderr, s)
		default:
		}
		code := lockedRun(f, args, stdout, stderr)
		wait := jittered(f.fleet.repeat)
		fmt.Fprintf(stderr, "rdmadoctor: run exit %d; next run in %v\n", code, wait.Round(time.Second))
		timer := time.NewTimer(wait)
		select {
		case s := <-sigs:
			timer.Stop()
			return stopped(stderr, s)
		case <-timer.C:
		}
	}
}

func stopped(stderr io.Writer, s os.Signal) int {
	fmt.Fprintf(stderr, "rdmadoctor: %v: stopping the repeated runs\n", s)
	return 0
}

// jittered spreads a fleet's runs: period ±10%, uniformly, so the nodes a
// rollout started together do not all probe at the same second.
func jittered(period time.Duration) time.Duration {
	spread := period / 5
	if spread <= 0 {
		return period
	}
	return period - spread/2 + rand.N(spread+1)
}
