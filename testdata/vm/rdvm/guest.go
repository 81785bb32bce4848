package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cmdTime runs a command N times (after one unrecorded warm-up run) with its
// output discarded and writes "<nanoseconds> <exit code>" per run to a file.
// With -ref it runs the reference command too, alternating the two, so that
// a burst of load on the host (TCG guests feel every one) lands on both
// sides of the ratio alike. busybox has no clock finer than a second,
// hence this.
func cmdTime(args []string) error {
	fl, cmd, err := splitDashDash(args)
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("time", flag.ContinueOnError)
	n := fs.Int("n", 20, "runs")
	out := fs.String("o", "", "file to write one line per run of CMD to")
	ref := fs.String("ref", "", "reference command (words split on spaces) to alternate with CMD")
	refOut := fs.String("ref-o", "", "file to write one line per run of the reference command to")
	limit := fs.Duration("limit", 90*time.Second, "kill a run after this long")
	if err := fs.Parse(fl); err != nil {
		return err
	}
	if *out == "" || *n < 1 || (*ref != "") != (*refOut != "") {
		return errors.New("need -o FILE, -n >= 1, and -ref with -ref-o")
	}
	type series struct {
		cmd  []string
		path string
		b    strings.Builder
	}
	all := []*series{{cmd: cmd, path: *out}}
	if *ref != "" {
		all = append(all, &series{cmd: strings.Fields(*ref), path: *refOut})
	}
	for i := -1; i < *n; i++ {
		for _, s := range all {
			d, code, err := timeOnce(s.cmd, *limit)
			if err != nil {
				return err
			}
			if i >= 0 {
				fmt.Fprintf(&s.b, "%d %d\n", d.Nanoseconds(), code)
			}
		}
	}
	for _, s := range all {
		if err := os.WriteFile(s.path, []byte(s.b.String()), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", s.path, err)
		}
	}
	return nil
}

func timeOnce(cmd []string, limit time.Duration) (time.Duration, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	c := exec.CommandContext(ctx, cmd[0], cmd[1:]...)
	start := time.Now()
	err := c.Run()
	d := time.Since(start)
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return d, ee.ExitCode(), nil
	case err != nil:
		return 0, 0, fmt.Errorf("run %s: %w", cmd[0], err)
	}
	return d, 0, nil
}

// rlimitMemlock is RLIMIT_MEMLOCK on Linux; package syscall does not name it.
const rlimitMemlock = 8

// cmdRunAs runs a command as an unprivileged user. RLIMIT_MEMLOCK is set
// before the switch (soft and hard, as `ulimit -l` does), and the process
// loses every capability with uid 0, CAP_IPC_LOCK included.
func cmdRunAs(args []string) (int, error) {
	fl, cmd, err := splitDashDash(args)
	if err != nil {
		return 1, err
	}
	fs := flag.NewFlagSet("runas", flag.ContinueOnError)
	user := fs.String("user", "1000", "uid or user name of /etc/passwd")
	memlock := fs.Int64("memlock", -1, "RLIMIT_MEMLOCK in KiB; -1 leaves it")
	if err := fs.Parse(fl); err != nil {
		return 1, err
	}
	uid, gid, home, err := lookupUser(*user)
	if err != nil {
		return 1, err
	}
	if *memlock >= 0 {
		lim := syscall.Rlimit{Cur: uint64(*memlock) * 1024, Max: uint64(*memlock) * 1024}
		if err := syscall.Setrlimit(rlimitMemlock, &lim); err != nil {
			return 1, fmt.Errorf("setrlimit RLIMIT_MEMLOCK %d KiB: %w", *memlock, err)
		}
	}
	c := exec.Command(cmd[0], cmd[1:]...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	c.Env = append(os.Environ(), "HOME="+home, "USER="+*user, "LOGNAME="+*user)
	c.Dir = "/"
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}}
	return exitCode(c.Run())
}

// exitCode turns a finished command's error into a shell-style status.
func exitCode(err error) (int, error) {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	default:
		return 1, err
	}
}

func lookupUser(name string) (uid, gid uint32, home string, err error) {
	data, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return 0, 0, "", fmt.Errorf("read /etc/passwd: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 7 || (f[0] != name && f[2] != name) {
			continue
		}
		u, err1 := strconv.ParseUint(f[2], 10, 32)
		g, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			return 0, 0, "", fmt.Errorf("/etc/passwd: bad ids in %q", line)
		}
		return uint32(u), uint32(g), f[5], nil
	}
	if u, err := strconv.ParseUint(name, 10, 32); err == nil {
		return uint32(u), uint32(u), "/", nil
	}
	return 0, 0, "", fmt.Errorf("no user %q in /etc/passwd", name)
}

// killReport is what cmdKillProbe writes to DIR/killprobe.json.
type killReport struct {
	Attempts    int              `json:"attempts"`
	Killed      bool             `json:"killed"`
	ChildPID    int              `json:"child_pid,omitempty"`
	ChildArgs   string           `json:"child_args,omitempty"`
	Baseline    map[string]int64 `json:"baseline"`
	AtKill      map[string]int64 `json:"at_kill,omitempty"`
	HeldAtKill  bool             `json:"held_at_kill"`
	ParentExit  int              `json:"parent_exit"`
	AfterExit   map[string]int64 `json:"after_exit,omitempty"`
	Note        string           `json:"note,omitempty"`
	ElapsedMS   int64            `json:"elapsed_ms"`
	SettleMS    int64            `json:"settle_ms"`
	Leaked      bool             `json:"leaked"`
	CountedKeys []string         `json:"counted_keys"`
}

// resourceKeys are the per-process verbs objects `rdma resource` counts.
var resourceKeys = []string{"pd", "cq", "qp", "mr", "cm_id", "ctx", "srq"}

// cmdKillProbe runs CMD (rdmadoctor at level 2), waits for a child of it to
// open a uverbs device and hold verbs objects, stops it, kills it with
// SIGKILL, lets CMD finish, and then checks that `rdma resource` is back to
// the counts from before the run: killing a probe child must leak nothing.
// The child is frozen with SIGSTOP between looks so that a fast probe cannot
// slip by; CMD is rerun (up to 3 times) when it finishes before the child is
// caught holding anything.
func cmdKillProbe(args []string) error {
	fl, cmd, err := splitDashDash(args)
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("killprobe", flag.ContinueOnError)
	out := fs.String("out", "", "directory for stdout, stderr, exit and killprobe.json")
	limit := fs.Duration("timeout", 120*time.Second, "give up on one run after this long")
	if err := fs.Parse(fl); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("need --out DIR")
	}
	rep := killReport{CountedKeys: resourceKeys}
	start := time.Now()
	rep.Baseline, err = rdmaResources()
	if err != nil {
		return err
	}
	for rep.Attempts = 1; rep.Attempts <= 3; rep.Attempts++ {
		done, err := killOnce(cmd, *out, *limit, &rep)
		if err != nil {
			return err
		}
		if done {
			break
		}
	}
	if rep.Attempts > 3 {
		rep.Attempts = 3
	}
	// The kernel frees a dead process's objects when its last file reference
	// goes; give it a moment before calling anything a leak.
	settle := time.Now()
	for {
		rep.AfterExit, err = rdmaResources()
		if err != nil {
			return err
		}
		if equalCounts(rep.AfterExit, rep.Baseline) || time.Since(settle) > 5*time.Second {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	rep.SettleMS = time.Since(settle).Milliseconds()
	rep.Leaked = !equalCounts(rep.AfterExit, rep.Baseline)
	rep.ElapsedMS = time.Since(start).Milliseconds()
	data, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(filepath.Join(*out, "killprobe.json"), data, 0o644); err != nil {
		return fmt.Errorf("write killprobe.json: %w", err)
	}
	fmt.Println(string(data))
	return nil
}

// killOnce runs CMD once; it reports done when a child was killed while it
// held verbs objects.
func killOnce(cmd []string, out string, limit time.Duration, rep *killReport) (bool, error) {
	stdout, err := os.Create(filepath.Join(out, "stdout"))
	if err != nil {
		return false, err
	}
	defer stdout.Close()
	stderr, err := os.Create(filepath.Join(out, "stderr"))
	if err != nil {
		return false, err
	}
	defer stderr.Close()
	c := exec.Command(cmd[0], cmd[1:]...)
	c.Stdout, c.Stderr = stdout, stderr
	if err := c.Start(); err != nil {
		return false, fmt.Errorf("start %s: %w", cmd[0], err)
	}
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	deadline := time.Now().Add(limit)
	finish := func(err error) (int, error) {
		code, err := exitCode(err)
		rep.ParentExit = code
		writeExit(out, code)
		return code, err
	}
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			_, err = finish(err)
			rep.Note = "the run ended before a child was seen holding verbs objects"
			return false, err
		default:
		}
		for _, pid := range descendants(c.Process.Pid) {
			if !holdsUverbs(pid) {
				continue
			}
			_ = syscall.Kill(pid, syscall.SIGSTOP)
			counts, err := rdmaResources()
			if err != nil {
				_ = syscall.Kill(pid, syscall.SIGCONT)
				return false, err
			}
			if !exceeds(counts, rep.Baseline) {
				// Opened the device but built nothing yet: let it run a
				// little and look again.
				_ = syscall.Kill(pid, syscall.SIGCONT)
				time.Sleep(time.Millisecond)
				continue
			}
			rep.Killed, rep.ChildPID, rep.AtKill, rep.HeldAtKill = true, pid, counts, true
			rep.ChildArgs = cmdline(pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGCONT)
			select {
			case err := <-exited:
				_, err = finish(err)
				return true, err
			case <-time.After(limit):
				_ = c.Process.Kill()
				_, err := finish(<-exited)
				rep.Note = "the parent did not end after its child was killed"
				return true, err
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	_ = c.Process.Kill()
	_, err = finish(<-exited)
	rep.Note = fmt.Sprintf("gave up after %s", limit)
	return true, err
}

func writeExit(dir string, code int) {
	_ = os.WriteFile(filepath.Join(dir, "exit"), []byte(strconv.Itoa(code)+"\n"), 0o644)
}

// descendants lists the pids below root, from /proc/*/stat.
func descendants(root int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := map[int]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		parent[pid] = ppid
	}
	var out []int
	for pid := range parent {
		for p := parent[pid]; p > 1; p = parent[p] {
			if p == root {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

func holdsUverbs(pid int) bool {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if t, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(t, "/dev/infiniband/uverbs") {
			return true
		}
	}
	return false
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// rdmaResources sums `rdma -j resource` over all devices.
func rdmaResources() (map[string]int64, error) {
	out, err := exec.Command("rdma", "-j", "resource").Output()
	if err != nil {
		return nil, fmt.Errorf("rdma -j resource: %w", err)
	}
	return parseResourceSummary(out)
}

func parseResourceSummary(data []byte) (map[string]int64, error) {
	var devs []map[string]any
	if err := json.Unmarshal(data, &devs); err != nil {
		return nil, fmt.Errorf("parse rdma -j resource: %w", err)
	}
	sum := map[string]int64{}
	for _, d := range devs {
		for _, k := range resourceKeys {
			if v, ok := d[k].(float64); ok {
				sum[k] += int64(v)
			}
		}
	}
	return sum, nil
}

func equalCounts(a, b map[string]int64) bool {
	for _, k := range resourceKeys {
		if a[k] != b[k] {
			return false
		}
	}
	return true
}

func exceeds(a, base map[string]int64) bool {
	for _, k := range []string{"pd", "mr", "cq", "qp"} {
		if a[k] > base[k] {
			return true
		}
	}
	return false
}
