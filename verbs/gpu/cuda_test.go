package gpu

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
)

var (
	fakeOnce sync.Once
	fakeLibs map[string]string // variant → path
	fakeErr  string
)

// fakeCUDA builds testdata/fakegpu.c into a shared library, once:
// variant "" is a CUDA 11.7+ driver (and a ROCm runtime with the dma-buf
// export), "NO_DMABUF" one without cuMemGetHandleForAddressRange (and
// without hsa_amd_portable_export_dmabuf).
func fakeCUDA(t *testing.T, variant string) string {
	t.Helper()
	fakeOnce.Do(func() {
		gcc, err := exec.LookPath("gcc")
		if err != nil {
			fakeErr = "gcc not found: install gcc"
			return
		}
		dir, err := os.MkdirTemp("", "fakegpu")
		if err != nil {
			fakeErr = err.Error()
			return
		}
		fakeLibs = map[string]string{}
		for _, v := range []string{"", "NO_DMABUF"} {
			so := filepath.Join(dir, "libcuda"+strings.ToLower(v)+".so.1")
			args := []string{"-shared", "-fPIC", "-o", so, "testdata/fakegpu.c"}
			if v != "" {
				args = append(args, "-D"+v)
			}
			if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
				fakeErr = "gcc: " + err.Error() + "\n" + string(out)
				return
			}
			fakeLibs[v] = so
		}
	})
	if fakeErr != "" {
		if strings.HasPrefix(fakeErr, "gcc:") || os.Getenv("CI") != "" {
			t.Fatal(fakeErr)
		}
		t.Skip(fakeErr)
	}
	return fakeLibs[variant]
}

// A library path the loader cannot find: the fakes are opened by path and
// stay loaded, so each test's behaviour comes from the environment alone.
func missingLib(t *testing.T, name string) string { return filepath.Join(t.TempDir(), name) }

func TestCUDAAllocCopyExport(t *testing.T) {
	lib := fakeCUDA(t, "")
	t.Setenv("FAKE_GPU", "")
	t.Setenv("FAKE_GPU_BUSIDS", "00000000:3B:00.0,0000:af:00.0")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c, err := OpenCUDA(lib)
	if err != nil {
		t.Fatal(err)
	}
	devs := c.Devices()
	if len(devs) != 2 || devs[0].PCIAddr != "0000:3b:00.0" || devs[1].Name != "Fake GPU 1" || devs[0].PCIBusID != "00000000:3B:00.0" {
		t.Fatalf("devices %+v", devs)
	}
	if devs[0].DMABuf == nil || !*devs[0].DMABuf || c.Version() != "CUDA driver 12.4" {
		t.Fatalf("dma-buf attribute %v, version %q", devs[0].DMABuf, c.Version())
	}
	if _, err := c.Alloc(4096); !IsCode(err, 201) || !strings.Contains(err.Error(), "cuMemAlloc_v2: CUDA_ERROR_INVALID_CONTEXT (201)") {
		t.Fatalf("alloc without a context: %v", err)
	}
	if err := c.Activate(devs[1]); err != nil {
		t.Fatal(err)
	}
	p, err := c.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SyncMemops(p); err != nil {
		t.Fatal(err)
	}
	in := []byte("gpudirect")
	out := make([]byte, len(in))
	if err := c.CopyIn(p, in); err != nil {
		t.Fatal(err)
	}
	if err := c.CopyOut(out, p); err != nil || string(out) != "gpudirect" {
		t.Fatalf("copy out %q, %v", out, err)
	}
	fd, off, err := c.ExportDMABuf(p, 4096)
	if err != nil || fd < 0 || off != 0 {
		t.Fatalf("export: fd %d offset %d, %v", fd, off, err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil || st.Size != 4096 {
		t.Fatalf("exported fd: size %d, %v", st.Size, err)
	}
	syscall.Close(fd)
	if _, _, err := c.ExportDMABuf(p+1, 4095); !IsCode(err, 1) {
		t.Fatalf("unaligned export: %v", err)
	}
	if err := c.Free(p); err != nil {
		t.Fatal(err)
	}
	if err := c.Deactivate(); err != nil {
		t.Fatal(err)
	}
	if err := c.Deactivate(); err != nil {
		t.Fatalf("a second Deactivate: %v", err)
	}
}

func TestCUDAWithoutDMABufExport(t *testing.T) {
	lib := fakeCUDA(t, "NO_DMABUF")
	t.Setenv("FAKE_GPU", "")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c, err := OpenCUDA(lib)
	if err != nil {
		t.Fatal(err)
	}
	if c.Devices()[0].DMABuf != nil {
		t.Errorf("a driver without the attribute reported dma-buf support %v", *c.Devices()[0].DMABuf)
	}
	_, _, err = c.ExportDMABuf(0, 4096)
	var ue *UnavailableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "older than 11.7") {
		t.Fatalf("export without the symbol: %v", err)
	}
}

func TestCUDAErrorsNamed(t *testing.T) {
	lib := fakeCUDA(t, "")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, c := range []struct {
		env, want string
		noDevice  bool
	}{
		{"nodevice", "cuInit: CUDA_ERROR_NO_DEVICE (100)", true},
		{"count0", "cuDeviceGetCount reports 0 devices", true},
		{"fail=cuInit:803", "cuInit: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803)", false},
		// A status cuGetErrorName does not know is named by the table.
		{"fail=cuInit:804", "cuInit: CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE (804)", false},
		{"fail=cuInit:12345", "cuInit returned 12345", false},
	} {
		t.Setenv("FAKE_GPU", c.env)
		_, err := OpenCUDA(lib)
		if err == nil || !strings.Contains(err.Error(), c.want) || errors.Is(err, ErrNoDevice) != c.noDevice {
			t.Errorf("%s: %v", c.env, err)
		}
	}
}

func TestOpenWithoutLibraries(t *testing.T) {
	_, err := Open(Libraries{CUDA: missingLib(t, "libcuda.so.1"), HIP: missingLib(t, "libamdhip64.so"), HSA: missingLib(t, "libhsa-runtime64.so.1")})
	var nl *NoLibraryError
	if !errors.As(err, &nl) || len(nl.Errs) != 2 || !strings.Contains(err.Error(), "libcuda.so.1") || !strings.Contains(err.Error(), "libamdhip64.so") {
		t.Fatalf("err %v", err)
	}
	_, err = OpenCUDA(missingLib(t, "libcuda.so.1"))
	var le *LoadError
	if !errors.As(err, &le) {
		t.Fatalf("err %T %v", err, err)
	}
}

func TestOpenNoDevice(t *testing.T) {
	lib := fakeCUDA(t, "")
	t.Setenv("FAKE_GPU", "nodevice")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_, err := Open(Libraries{CUDA: lib, HIP: missingLib(t, "libamdhip64.so")})
	if !errors.Is(err, ErrNoDevice) || !strings.Contains(err.Error(), "libamdhip64.so") {
		t.Fatalf("err %v", err)
	}
}

func TestParsePCIAddr(t *testing.T) {
	for in, want := range map[string]string{
		"0000:3B:00.0": "0000:3b:00.0", "00000000:AF:1f.7": "0000:af:1f.7", "3b:00.1": "0000:3b:00.1",
		"10000:01:00.0": "10000:01:00.0",
	} {
		if got, err := ParsePCIAddr(in); err != nil || got != want {
			t.Errorf("%q: %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "3b", "0000:3b:00", "0000:3b:20.0", "0000:3b:00.8", "0000:zz:00.0", "0000:100:00.0", ":3b:00.0"} {
		if got, err := ParsePCIAddr(bad); err == nil {
			t.Errorf("%q parsed as %q", bad, got)
		}
	}
}

func FuzzParsePCIAddr(f *testing.F) {
	for _, s := range []string{"0000:3B:00.0", "00000000:AF:1f.7", "3b:00.1", "::.", "0000:3b:00.8"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParsePCIAddr(s)
		if err != nil {
			return
		}
		// A normalised address parses to itself.
		if again, err := ParsePCIAddr(got); err != nil || again != got {
			t.Fatalf("%q → %q → %q, %v", s, got, again, err)
		}
	})
}
