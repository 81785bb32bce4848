package sysfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func writeRoot(t *testing.T, files map[string]string, links map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for p, target := range links {
		full := filepath.Join(dir, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestHostReadsThroughRelativeLinksButNeverOutOfTheRoot(t *testing.T) {
	dir := writeRoot(t, map[string]string{
		"sys/devices/pci0000:00/0000:3b:00.0/vendor":                      "0x15b3\n",
		"sys/devices/pci0000:00/0000:3b:00.0/infiniband/mlx5_0/node_guid": "0c42:a103:002b:3c4c\n",
	}, map[string]string{
		"sys/class/infiniband/mlx5_0":                                  "../../devices/pci0000:00/0000:3b:00.0/infiniband/mlx5_0",
		"sys/devices/pci0000:00/0000:3b:00.0/infiniband/mlx5_0/device": "../../../0000:3b:00.0",
		"sys/escape-abs":                  "/etc/hostname",
		"sys/escape-rel":                  "../../../../../../../../etc/hostname",
		"sys/class/infiniband/dir-escape": "../../../..",
	})
	h, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if v, err := h.ReadAttr("/sys/class/infiniband/mlx5_0/node_guid"); err != nil || v != "0c42:a103:002b:3c4c" {
		t.Fatalf("through the class link: %q %v", v, err)
	}
	if v, err := h.ReadAttr("/sys/class/infiniband/mlx5_0/device/vendor"); err != nil || v != "0x15b3" {
		t.Fatalf("through the device link: %q %v", v, err)
	}
	if a, err := h.LinkBase("/sys/class/infiniband/mlx5_0/device"); err != nil || a != "0000:3b:00.0" {
		t.Fatalf("device link base: %q %v", a, err)
	}
	if p, err := h.ResolveLink("/sys/class/infiniband/mlx5_0"); err != nil || p != "/sys/devices/pci0000:00/0000:3b:00.0/infiniband/mlx5_0" {
		t.Fatalf("resolve: %q %v", p, err)
	}
	for _, p := range []string{"/sys/escape-abs", "/sys/escape-rel", "/sys/class/infiniband/dir-escape/etc/hostname"} {
		_, err := h.ReadAttr(p)
		if err == nil || !strings.Contains(err.Error(), "outside the root") {
			t.Errorf("%s: err %v, want a refusal", p, err)
		}
		if err != nil && !strings.Contains(err.Error(), dir) {
			t.Errorf("%s: error %q does not name the path", p, err)
		}
	}
	_, err = h.ReadAttr("/sys/nothing")
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), filepath.Join(dir, "sys/nothing")) {
		t.Errorf("missing: %v", err)
	}
}

func TestReadAttrIsOneBoundedRead(t *testing.T) {
	big := strings.Repeat("x", 3*attrReadSize)
	dir := writeRoot(t, map[string]string{"sys/big": big, "proc/huge": ""}, nil)
	h, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	v, err := h.ReadAttr("/sys/big")
	if err != nil || len(v) != attrReadSize {
		t.Fatalf("got %d bytes, %v; want one page", len(v), err)
	}
	if err := os.Truncate(filepath.Join(dir, "proc/huge"), maxFileSize+1); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ReadFile("/proc/huge"); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("oversized file: %v", err)
	}
	if _, err := h.ReadAttr("/sys"); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("directory as attribute: %v", err)
	}
}

func TestOpenRejectsBadRoots(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	for _, c := range []struct{ root, says string }{
		{"", "empty"}, {file, "not a directory"}, {filepath.Join(t.TempDir(), "none"), "no such file"},
	} {
		if _, err := Open(c.root); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("Open(%q): %v, want %q", c.root, err, c.says)
		}
	}
	dir := writeRoot(t, map[string]string{FactsFile: `{"schema":"other/v9"}`}, nil)
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "schema") {
		t.Errorf("wrong facts schema: %v", err)
	}
}

func TestFactsAreAnsweredOrExplained(t *testing.T) {
	dir := writeRoot(t, map[string]string{FactsFile: `{"schema":"rdmadoctor.facts/v1","hostname":"n1",
		"unavailable":{"dcb":"permission denied"},"netdevs":[{"name":"eth0","mtu":9000,"operstate":"up"}]}`}, nil)
	h, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if h.Hostname() != "n1" {
		t.Errorf("hostname %q", h.Hostname())
	}
	if nd, err := h.Netdevs(); err != nil || len(nd) != 1 || nd[0].MTU != 9000 {
		t.Errorf("netdevs %v %v", nd, err)
	}
	if _, err := h.DCB("eth0"); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("dcb: %v", err)
	}
	if _, err := h.RecordedVerbs(); err == nil || !strings.Contains(err.Error(), "not recorded") {
		t.Errorf("libibverbs: %v", err)
	}
}

func TestParsers(t *testing.T) {
	mods, errs := ParseProcModules([]byte("mlx5_ib 458752 0 - Live 0xffffffffc0a2e000\n" +
		"ib_uverbs 176128 2 rdma_ucm,mlx5_ib, Live 0xffffffffc09d0000\nbad line\n"))
	if len(mods) != 2 || len(errs) != 1 || mods[1].Refs != 2 || strings.Join(mods[1].UsedBy, ",") != "rdma_ucm,mlx5_ib" {
		t.Errorf("modules %+v errs %v", mods, errs)
	}
	for rel, want := range map[string]string{"6.1.0-18-amd64": "6.1.0", "5.14.0-362.8.1.el9_3.x86_64": "5.14.0", "4.15": "4.15.0"} {
		v, err := ParseKernelRelease(rel)
		if err != nil || v.String() != want {
			t.Errorf("%s: %v %v", rel, v, err)
		}
	}
	for _, bad := range []string{"", "six", "6", "99999999999.1"} {
		if _, err := ParseKernelRelease(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if s, err := ParsePortState("4: ACTIVE"); err != nil || s.Code != 4 || s.Name != "ACTIVE" {
		t.Errorf("state %+v %v", s, err)
	}
	if _, err := ParsePortState("ACTIVE"); err == nil {
		t.Error("state without number parsed")
	}
	if v, err := ParseHex("0x15b3", 16); err != nil || v != 0x15b3 {
		t.Errorf("hex %v %v", v, err)
	}
	if _, err := ParseHex("0x1ffff", 16); err == nil {
		t.Error("17-bit value fit in 16 bits")
	}
}

func FuzzParseProcModules(f *testing.F) {
	f.Add([]byte("mlx5_ib 458752 0 - Live 0xffffffffc0a2e000\nib_core 1 9 a,b, Live 0x0 (OE)\n"))
	f.Add([]byte("\x00\xff\n\n  \n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		mods, _ := ParseProcModules(data)
		for _, m := range mods {
			if !validModuleName(m.Name) {
				t.Fatalf("invalid name accepted: %q", m.Name)
			}
		}
	})
}

func FuzzParseKernelRelease(f *testing.F) {
	for _, s := range []string{"6.1.0-18-amd64", "4.15", "5.14.0-362.el9", "..", "1.2.3.4.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseKernelRelease(s)
		if err == nil && (v.Major < 0 || v.Minor < 0) {
			t.Fatalf("negative version from %q", s)
		}
	})
}

func FuzzParsePortState(f *testing.F) {
	for _, s := range []string{"4: ACTIVE", "1: DOWN", "5: LinkUp", ":", "-1: X"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		st, err := ParsePortState(s)
		if err == nil && (st.Code < 0 || st.Code > 255) {
			t.Fatalf("out-of-range state from %q", s)
		}
	})
}

func FuzzParseHex(f *testing.F) {
	for _, s := range []string{"0x15b3", "0X1", "", "0x", "ffffffffffffffffff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := ParseHex(s, 16); err == nil && v > 0xffff {
			t.Fatalf("%q gave %d beyond 16 bits", s, v)
		}
	})
}

func TestRecordedReadErrorsFailLikeTheHost(t *testing.T) {
	dir := writeRoot(t, map[string]string{
		"sys/class/infiniband/mlx5_0/ports/1/counters/VL15_dropped": "",
		FactsFile: `{"schema":"rdmadoctor.facts/v1","read_errors":{"/sys/class/infiniband/mlx5_0/ports/1/counters/VL15_dropped":"EINVAL"}}`,
	}, nil)
	h, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.ReadAttr("/sys/class/infiniband/mlx5_0/ports/1/counters/VL15_dropped")
	if !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "VL15_dropped") {
		t.Errorf("recorded EINVAL: %v", err)
	}
}

func TestLinkBaseResolvesRelativeParents(t *testing.T) {
	dir := writeRoot(t, map[string]string{"sys/devices/pci0000:00/0000:3b:00.0/vendor": "0x15b3\n"}, map[string]string{
		"sys/devices/pci0000:00/0000:3b:00.0/infiniband/mlx5_0/device": "../..",
	})
	h, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if a, err := h.LinkBase("/sys/devices/pci0000:00/0000:3b:00.0/infiniband/mlx5_0/device"); err != nil || a != "0000:3b:00.0" {
		t.Errorf("LinkBase of ../.. = %q, %v; want the directory's name", a, err)
	}
}
