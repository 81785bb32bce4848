package probe

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The real ChildMain and the real binding, against a fake libibverbs built
// from testdata/fakeibverbs.c that hangs, crashes or fails on demand.

var (
	fakeOnce sync.Once
	fakeLib  string
	fakeErr  string
)

func fakeLibrary(t *testing.T) string {
	t.Helper()
	fakeOnce.Do(func() {
		gcc, err := exec.LookPath("gcc")
		if err != nil {
			fakeErr = "gcc not found: install gcc and libibverbs-dev"
			return
		}
		dir, err := os.MkdirTemp("", "fakeibverbs")
		if err != nil {
			fakeErr = err.Error()
			return
		}
		so := filepath.Join(dir, "libibverbs.so.1")
		out, err := exec.Command(gcc, "-shared", "-fPIC", "-o", so, "testdata/fakeibverbs.c").CombinedOutput()
		if err != nil {
			if bytes.Contains(out, []byte("infiniband/verbs.h")) {
				fakeErr = "<infiniband/verbs.h> not found: install libibverbs-dev"
				return
			}
			fakeErr = "gcc: " + err.Error() + "\n" + string(out)
			return
		}
		fakeLib = so
	})
	if fakeLib == "" {
		if strings.HasPrefix(fakeErr, "gcc:") || os.Getenv("CI") != "" {
			t.Fatal(fakeErr)
		}
		t.Skip(fakeErr)
	}
	return fakeLib
}

func withFake(t *testing.T, mode string) string {
	lib := fakeLibrary(t)
	t.Setenv(behaviourEnv, "")
	t.Setenv("FAKE_IBV", mode)
	return lib
}

func TestFakeEnumerateENOSYS(t *testing.T) {
	lib := withFake(t, "enosys")
	en, err := Enumerate(context.Background(), testExe(t), lib, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if en.ListErrnoName != "ENOSYS" || en.ListErrno != 38 || len(en.Devices) != 0 {
		t.Fatalf("enumeration %+v", en)
	}
}

func TestFakeEnumerateDevices(t *testing.T) {
	lib := withFake(t, "two")
	en, err := Enumerate(context.Background(), testExe(t), lib, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(en.Devices) != 2 || en.Devices[0].Name != "mlx5_0" || en.Devices[0].NodeGUID != "0002:c903:00a1:b2c3" ||
		en.Devices[1].UverbsDev != "uverbs1" {
		t.Fatalf("devices %+v", en.Devices)
	}
	if len(en.Warnings) != 1 || !strings.Contains(en.Warnings[0], "couldn't load driver") {
		t.Fatalf("warnings %q", en.Warnings)
	}
	if en.LoadedFrom != lib {
		t.Fatalf("loaded from %q, want %q", en.LoadedFrom, lib)
	}
}

func TestFakeEnumerateHangIsCut(t *testing.T) {
	lib := withFake(t, "hang-list")
	t0 := time.Now()
	_, err := Enumerate(context.Background(), testExe(t), lib, 500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "in ibv_get_device_list") || time.Since(t0) > 3*time.Second {
		t.Fatalf("err %v after %v", err, time.Since(t0))
	}
}

func TestFakeEnumerateCrash(t *testing.T) {
	lib := withFake(t, "segv-list")
	_, err := Enumerate(context.Background(), testExe(t), lib, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "crashed with SIGSEGV in ibv_get_device_list") {
		t.Fatalf("err %v", err)
	}
}

func TestFakeProbeOpenEACCES(t *testing.T) {
	lib := withFake(t, "eacces-open")
	res := Run(context.Background(), testExe(t), []Target{{Device: "fake0", Ports: []int{1}}}, Options{Library: lib})
	d := res.Devices["fake0"]
	if d.Failure != nil {
		t.Fatalf("failure %+v", d.Failure)
	}
	pr := d.Port(1)
	st := pr.Resources.Failed()
	if st == nil || st.Name != "ibv_open_device" || st.ErrnoName != "EACCES" || !strings.Contains(st.Cause, "/dev/infiniband/uverbs0") {
		t.Fatalf("resources step %+v", st)
	}
	for name, p := range map[string]*Probe{QPState: &pr.QPState.Probe, SendPoll: &pr.SendPoll.Probe,
		CQOverflow: &pr.CQOverflow.Probe, DestroyOrder: &pr.DestroyOrder.Probe} {
		if !strings.HasPrefix(p.Skipped, "blocked by verbs.resources: ibv_open_device") {
			t.Errorf("%s: skipped %q", name, p.Skipped)
		}
	}
}

func TestFakeProbeHangInVerbIsCut(t *testing.T) {
	lib := withFake(t, "hang-open")
	t0 := time.Now()
	res := Run(context.Background(), testExe(t), []Target{{Device: "fake0", Ports: []int{1}}},
		Options{Library: lib, Timeout: 500 * time.Millisecond})
	f := res.Devices["fake0"].Failure
	if f == nil || !f.TimedOut || f.InProgress != "port 1 verbs.resources: ibv_open_device" {
		t.Fatalf("failure %+v", f)
	}
	if d := time.Since(t0); d > 3*time.Second {
		t.Fatalf("took %v", d)
	}
}

func TestFakeProbeUnknownDevice(t *testing.T) {
	lib := withFake(t, "two")
	res := Run(context.Background(), testExe(t), []Target{{Device: "mlx5_9", Ports: []int{1}}}, Options{Library: lib})
	st := res.Devices["mlx5_9"].Port(1).Resources.Failed()
	if st == nil || st.Name != "ibv_get_device_list" || !strings.Contains(st.Error, "mlx5_0, mlx5_1") {
		t.Fatalf("step %+v", st)
	}
}

func TestProbeWithoutLibrary(t *testing.T) {
	t.Setenv(behaviourEnv, "")
	path := filepath.Join(t.TempDir(), "libibverbs.so.1")
	res := Run(context.Background(), testExe(t), []Target{{Device: "mlx5_0", Ports: []int{1}}}, Options{Library: path})
	st := res.Devices["mlx5_0"].Port(1).Resources.Failed()
	if st == nil || st.Name != "dlopen "+path || !strings.Contains(st.Error, "No such file") {
		t.Fatalf("step %+v", st)
	}
}
