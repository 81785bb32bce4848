package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmadoctor/rdmadoctor/report"
)

// Issue 22, finding 1: a lock file any local user could open was a lock any
// local user could hold, and every root run then exited 3 (success to
// systemd, the prolog's "not now").

const nobodyID = 65534

// asNobody is setpriv's prefix that runs a command as uid/gid 65534 with no
// supplementary groups; the test is skipped, with the reason, when it
// cannot be (not root, or no setpriv).
func asNobody(t *testing.T) []string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: an unprivileged user's attempt on root's lock is the point")
	}
	sp, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("needs setpriv (util-linux) to run a process as another user")
	}
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("needs flock(1) (util-linux) to hold a lock as another user")
	}
	return []string{sp, "--reuid=65534", "--regid=65534", "--clear-groups", "--"}
}

// holdLock runs flockArgs (flock(1)'s, which then prints "held" and sleeps)
// under prefix; it returns once the lock is held, or the child's output
// when it could not take it. extra are inherited descriptors (fd 3 on).
func holdLock(t *testing.T, prefix []string, extra []*os.File, flockArgs ...string) (held bool, out string) {
	t.Helper()
	args := append(append(append([]string{}, prefix...), "flock", "--nonblock", "--exclusive"), flockArgs...)
	args = append(args, "-c", "echo held; exec sleep 60")
	cmd := exec.Command(args[0], args[1:]...)
	cmd.ExtraFiles = extra
	// flock(1) runs the sleep as its child: the group is killed, not
	// only flock, so no holder outlives the test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait(); r.Close() })
	line, _ := bufio.NewReader(r).ReadString('\n')
	return strings.TrimSpace(line) == "held", line
}

// stateDir is a directory shaped as /var/lib/rdmadoctor is: owned by root,
// 0755, every parent traversable by others, so that only the lock file's
// own mode stands between another user and it.
func stateDir(t *testing.T) string {
	dir := filepath.Join(sharedDir(t), "var-lib-rdmadoctor")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

var portDown = filepath.Join(hostsDir, "port-down")

// An unprivileged user cannot open root's lock file (0600), so cannot hold
// it, and the root run proceeds to its verdict (port-down: 19).
func TestLockUnprivilegedUserCannotHold(t *testing.T) {
	prefix := asNobody(t)
	state := filepath.Join(stateDir(t), "state.json")
	if code, _, stderr := runCLI(t, "--root", portDown, "--level", "1", "--state", state); code != 19 {
		t.Fatalf("first run: exit %d, %s", code, stderr)
	}
	st, err := os.Lstat(lockPathFor(state))
	if err != nil || st.Mode() != lockMode || st.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Fatalf("lock file %v, %v: want a regular file, mode %v, owned by root", st.Mode(), err, os.FileMode(lockMode))
	}
	if st, _ := os.Stat(state); st.Mode().Perm() != 0o600 {
		t.Errorf("state mode %v, want 0600: only root reads what drains and taints rest on", st.Mode().Perm())
	}
	held, out := holdLock(t, prefix, nil, lockPathFor(state))
	if held || !strings.Contains(out, "Permission denied") {
		t.Fatalf("uid 65534 on the lock: held=%v, %q; want permission denied", held, out)
	}
	if code, _, stderr := runCLI(t, "--root", portDown, "--level", "1", "--state", state); code != 19 {
		t.Errorf("root run after the attempt: exit %d, %s; want 19", code, stderr)
	}
}

// An earlier version's 0644 lock, opened and held by another user before
// the upgrade: the run replaces the file (a chmod would not take back the
// descriptor), says so, and proceeds.
func TestLockInsecureLeftoverReplaced(t *testing.T) {
	prefix := asNobody(t)
	state := filepath.Join(stateDir(t), "state.json")
	lock := lockPathFor(state)
	if err := os.WriteFile(lock, []byte("pid 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if held, out := holdLock(t, prefix, nil, lock); !held {
		t.Fatalf("uid 65534 could not hold the 0644 lock: %s", out)
	}
	code, _, stderr := runCLI(t, "--root", portDown, "--level", "1", "--state", state)
	if code != 19 || !strings.Contains(stderr, "replaced "+lock+" (mode 0644") {
		t.Fatalf("exit %d, stderr %q: want 19 and the replacement said", code, stderr)
	}
	if st, _ := os.Lstat(lock); st.Mode() != lockMode {
		t.Errorf("lock mode %v after the replacement", st.Mode())
	}
}

// A process of another user that holds the lock (here through a descriptor
// root handed it) is named, pid and uid, and the run is exit 1 — it could
// not run — never 3, which systemd counts as success.
func TestLockForeignHolderIsNotBusy(t *testing.T) {
	asNobody(t) // skips unless root
	state := filepath.Join(stateDir(t), "state.json")
	l, err := acquireLock(lockPathFor(state))
	if err != nil {
		t.Fatal(err)
	}
	fd := l.f
	unlockOnly(t, fd)
	holdFD3AsNobody(t, fd)
	code, _, stderr := runCLI(t, "--root", portDown, "--level", "1", "--state", state)
	if code != report.ExitInternal || !strings.Contains(stderr, "uid 65534") || !strings.Contains(stderr, "pid ") || strings.Contains(stderr, "exit 3") {
		t.Fatalf("exit %d, stderr %q: want 1 naming the holder's pid and uid 65534", code, stderr)
	}
	if code, _, stderr := runCLI(t, "ack", "counters.errors", "--reason", "x", "--state", state, "--root", portDown); code != report.ExitInternal || !strings.Contains(stderr, "uid 65534") {
		t.Errorf("ack: exit %d, %q: want 1 at once, the holder named", code, stderr)
	}
}

// holdFD3AsNobody runs this test binary as uid 65534 (TestHelperHoldFD3),
// handing it f as fd 3, and returns once it holds the flock on it — a
// process of another user that stays, so /proc/locks names it.
func holdFD3AsNobody(t *testing.T, f *os.File) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The go tool builds tests in a directory only root may enter.
	bin := filepath.Join(sharedDir(t), "holder.test")
	if out, err := exec.Command("cp", self, bin).CombinedOutput(); err != nil {
		t.Fatalf("copy the test binary: %v %s", err, out)
	}
	os.Chmod(bin, 0o755)
	cmd := exec.Command(bin, "-test.run=^TestHelperHoldFD3$")
	cmd.Env = append(os.Environ(), "RDMADOCTOR_TEST_HOLD_FD3=1")
	cmd.ExtraFiles = []*os.File{f}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyID, Gid: nobodyID, Groups: []uint32{}}}
	r, w, _ := os.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); r.Close() })
	line, _ := bufio.NewReader(r).ReadString('\n')
	if strings.TrimSpace(line) != "held" {
		t.Fatalf("uid 65534 could not hold the inherited descriptor: %q", line)
	}
}

// TestHelperHoldFD3 is holdFD3AsNobody's child, not a test of its own.
func TestHelperHoldFD3(t *testing.T) {
	if os.Getenv("RDMADOCTOR_TEST_HOLD_FD3") != "1" {
		t.Skip("the child process of holdFD3AsNobody; runs only there")
	}
	if err := syscall.Flock(3, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		os.Stdout.WriteString("flock: " + err.Error() + "\n")
		os.Exit(1)
	}
	os.Stdout.WriteString("held\n")
	time.Sleep(time.Minute)
	os.Exit(0)
}

// unlockOnly drops this process's flock on f, keeping f open to hand on.
func unlockOnly(t *testing.T, f *os.File) {
	t.Helper()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
}

// A state directory others can write is refused, with the reason, before
// anything is locked or written — sticky or not.
func TestLockDirWritableByOthersRefused(t *testing.T) {
	for _, mode := range []os.FileMode{0o777, 0o775, 0o777 | os.ModeSticky} {
		dir := filepath.Join(t.TempDir(), "state")
		os.Mkdir(dir, 0o755)
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		state := filepath.Join(dir, "state.json")
		code, _, stderr := runCLI(t, "--root", portDown, "--level", "1", "--state", state)
		if code != report.ExitInternal || !strings.Contains(stderr, dir) || !strings.Contains(stderr, "writable by group or others") {
			t.Errorf("mode %v: exit %d, stderr %q; want 1 naming %s and why", mode, code, stderr, dir)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("mode %v: the run left %d file(s) in a refused directory", mode, len(ents))
		}
	}
}

// A directory owned by another user is refused: that user could change it.
func TestLockDirOwnedByOtherUserRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a directory to another user")
	}
	dir := filepath.Join(t.TempDir(), "state")
	os.Mkdir(dir, 0o755)
	if err := os.Chown(dir, nobodyID, nobodyID); err != nil {
		t.Fatal(err)
	}
	err := checkPrivateDir(dir)
	if err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("err = %v, want the owner named", err)
	}
	// A symbolic link to it from a safe place is followed and judged.
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(dir, link)
	if err := checkPrivateDir(link); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("through a link: err = %v", err)
	}
	if _, err := acquireLock(filepath.Join(dir, "x.lock")); err == nil {
		t.Error("a lock in another user's directory was taken")
	}
}

// A lock file that is a symbolic link is refused; the file it points at is
// neither truncated nor written (root used to write "pid N" into it).
func TestLockSymlinkRefused(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "passwd")
	os.WriteFile(victim, []byte("precious\n"), 0o644)
	state := filepath.Join(dir, "state.json")
	if err := os.Symlink(victim, lockPathFor(state)); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "--root", portDown, "--level", "1", "--state", state)
	if code != report.ExitInternal || !strings.Contains(stderr, lockPathFor(state)) || !strings.Contains(stderr, "symbolic link") {
		t.Errorf("exit %d, stderr %q; want 1 naming the link", code, stderr)
	}
	if got, _ := os.ReadFile(victim); string(got) != "precious\n" {
		t.Errorf("the link's target now holds %q", got)
	}
	// The Slurm act lock too.
	act := filepath.Join(dir, "slurm.lock")
	os.Symlink(victim, act)
	if _, err := lockAct(t.Context(), act); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("act lock through a link: %v", err)
	}
	// A FIFO (or any non-regular file) is refused without blocking.
	fifo := filepath.Join(dir, "fifo.lock")
	syscall.Mkfifo(fifo, 0o600)
	if _, err := acquireLock(fifo); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("FIFO lock: %v", err)
	}
}

// A run that finds the lock busy leaves the holder's line as it is.
func TestBusyRunKeepsHolderLine(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	l, err := acquireLock(lockPathFor(state))
	if err != nil {
		t.Fatal(err)
	}
	defer l.release()
	before, _ := os.ReadFile(lockPathFor(state))
	code, _, stderr := runCLI(t, "--root", portDown, "--level", "1", "--state", state)
	if code != ExitBusy || !strings.Contains(stderr, "uid 0") && os.Geteuid() == 0 {
		t.Errorf("exit %d, stderr %q: want 3, the holder (this process) named", code, stderr)
	}
	if after, _ := os.ReadFile(lockPathFor(state)); string(after) != string(before) || !strings.HasPrefix(string(after), "pid ") {
		t.Errorf("lock file %q, was %q", after, before)
	}
}

// A foreign holder of the Slurm act lock does not keep a broken node in
// service: the health check acts without the lock and drains.
func TestSlurmActLockForeignHolderStillDrains(t *testing.T) {
	prefix := asNobody(t)
	lock := filepath.Join(stateDir(t), "slurm.lock")
	os.WriteFile(lock, nil, 0o644) // an earlier version's lock, held by a job's user
	if held, out := holdLock(t, prefix, nil, lock); !held {
		t.Fatalf("uid 65534 could not hold the 0644 lock: %s", out)
	}
	f := newFakeScontrol(t, "node17", "IDLE", "")
	start := time.Now()
	r := runSlurmCmd(t, node17, "healthcheck", "--budget=5s", "--lock-file="+lock, "--scontrol", f.path, fixture("port-down"))
	if r.code != 0 || len(f.updates(t)) != 1 || time.Since(start) > 4*time.Second {
		t.Fatalf("exit %d after %v, calls %q, stderr %q: want a drain at once", r.code, time.Since(start), f.calls(t), r.stderr)
	}
}

// /proc/locks: the holder's line, not a waiter's ("->"), nor a POSIX lock.
func TestFlockHolderPid(t *testing.T) {
	const locks = `1: POSIX  ADVISORY  WRITE 700 fe:00:42 0 EOF
2: FLOCK  ADVISORY  WRITE 10498 fe:00:9978081 0 EOF
2: -> FLOCK  ADVISORY  WRITE 10500 fe:00:9978081 0 EOF
3: FLOCK  ADVISORY  WRITE 900 fe:01:9978081 0 EOF
garbage
`
	for _, tc := range []struct {
		maj, min uint32
		ino      uint64
		want     int
	}{{254, 0, 9978081, 10498}, {254, 1, 9978081, 900}, {254, 0, 42, 0}, {8, 1, 9978081, 0}} {
		if got := flockHolderPid(strings.NewReader(locks), tc.maj, tc.min, tc.ino); got != tc.want {
			t.Errorf("%x:%x:%d: pid %d, want %d", tc.maj, tc.min, tc.ino, got, tc.want)
		}
	}
	// Live: this process's own lock is found with its pid and uid.
	l, err := acquireLock(filepath.Join(t.TempDir(), "x.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.release()
	if h := findHolder(l.f); !h.known || h.pid != os.Getpid() || h.uid != os.Geteuid() || h.foreign() {
		t.Errorf("own lock: %+v", h)
	}
}
