package gpu

import (
	"errors"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// The fake serves as libamdhip64.so and libhsa-runtime64.so.1; CUDA is
// absent, so Open takes HIP.
func TestHIPAllocCopyExport(t *testing.T) {
	lib := fakeCUDA(t, "")
	t.Setenv("FAKE_GPU", "")
	t.Setenv("FAKE_GPU_BUSIDS", "0000:c1:00.0,0000:e1:00.0")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	d, err := Open(Libraries{CUDA: missingLib(t, "libcuda.so.1"), HIP: lib, HSA: lib})
	if err != nil {
		t.Fatal(err)
	}
	if d.Vendor() != "AMD" || len(d.Devices()) != 2 || d.Devices()[1].PCIAddr != "0000:e1:00.0" || d.Calls().SyncMemops != "" {
		t.Fatalf("%s %+v %+v", d.Vendor(), d.Devices(), d.Calls())
	}
	if err := d.Activate(d.Devices()[1]); err != nil {
		t.Fatal(err)
	}
	p, err := d.Alloc(3 * 4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CopyIn(p+4096, []byte("rocm")); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 4)
	if err := d.CopyOut(out, p+4096); err != nil || string(out) != "rocm" {
		t.Fatalf("copy out %q, %v", out, err)
	}
	// ROCm's export stands for the whole allocation; the offset says
	// where the range starts in it.
	fd, off, err := d.ExportDMABuf(p+4096, 4096)
	if err != nil || off != 4096 {
		t.Fatalf("export: fd %d offset %d, %v", fd, off, err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil || st.Size != 3*4096 {
		t.Fatalf("exported fd: size %d, %v", st.Size, err)
	}
	syscall.Close(fd)
	if err := d.Free(p); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FAKE_GPU", "fail=hipMalloc:2")
	if _, err := d.Alloc(4096); err == nil || err.Error() != "hipMalloc: hipErrorOutOfMemory (2)" {
		t.Fatalf("failed hipMalloc: %v", err)
	}
}

func TestHIPWithoutExportOrDevice(t *testing.T) {
	lib := fakeCUDA(t, "NO_DMABUF")
	t.Setenv("FAKE_GPU", "")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h, err := OpenHIP(lib, lib)
	if err != nil {
		t.Fatal(err)
	}
	var ue *UnavailableError
	if _, _, err := h.ExportDMABuf(0, 4096); !errors.As(err, &ue) || !strings.Contains(err.Error(), "hsa_amd_portable_export_dmabuf") {
		t.Fatalf("export without the symbol: %v", err)
	}
	t.Setenv("FAKE_GPU", "count0")
	if _, err := OpenHIP(lib, lib); !errors.Is(err, ErrNoDevice) {
		t.Fatalf("no device: %v", err)
	}
}
