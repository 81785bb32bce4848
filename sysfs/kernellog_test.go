package sysfs

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseKmsgRecord(t *testing.T) {
	rec := "3,1234,5678901234,-;mlx5_core 0000:3b:00.0: mlx5_cmd_check:794: CREATE_MKEY(0x200) op_mod(0x0) failed\n SUBSYSTEM=pci\n DEVICE=+pci:0000:3b:00.0\n"
	r, ok := ParseKmsgRecord([]byte(rec))
	if !ok {
		t.Fatal("not parsed")
	}
	if r.Level != 3 || r.Time != 5678901234*time.Microsecond || !strings.HasPrefix(r.Text, "mlx5_core 0000:3b:00.0:") || strings.Contains(r.Text, "SUBSYSTEM") {
		t.Errorf("parsed %+v", r)
	}
	if got := r.String(); got != "[ 5678.901234] mlx5_core 0000:3b:00.0: mlx5_cmd_check:794: CREATE_MKEY(0x200) op_mod(0x0) failed" {
		t.Errorf("String() = %q", got)
	}
	for _, bad := range []string{"", "no semicolon", "x,1,2,-;t", "6,1;t", "6,1,-5,-;t", "-1,1,2,-;t"} {
		if _, ok := ParseKmsgRecord([]byte(bad)); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestParseSyslogBuffer(t *testing.T) {
	buf := "<6>[    3.141592] rdma_rxe: loaded\n<4>[   12.000001] eth0: link up\nno prefix at all\n<3>[ bad ] infiniband mlx5_0: x\n"
	recs := ParseSyslogBuffer([]byte(buf))
	if len(recs) != 4 {
		t.Fatalf("%d records", len(recs))
	}
	if recs[0].Level != 6 || recs[0].Time != 3141592*time.Microsecond || recs[0].Text != "rdma_rxe: loaded" {
		t.Errorf("first %+v", recs[0])
	}
	if recs[2].Level != -1 || recs[2].Time != -1 || recs[2].Text != "no prefix at all" {
		t.Errorf("third %+v", recs[2])
	}
	if recs[3].Time != -1 || recs[3].Text != "[ bad ] infiniband mlx5_0: x" {
		t.Errorf("a bad timestamp is kept as text: %+v", recs[3])
	}
}

func TestIsRDMAKernelMessage(t *testing.T) {
	for _, s := range []string{
		"mlx5_core 0000:3b:00.0: E-Switch: Total vports 2",
		"infiniband mlx5_0: create_qp:3206:(pid 1234): Create QP type 2 failed",
		"rdma_rxe: loaded", "rxe0: added dummy0", "irdma 0000:18:00.0: irdma_probe", "bnxt_re: bnxt_re_dev_init",
		"efa 0000:00:06.0: Setup irq", "ib_uverbs: module loaded", "mlx5_ib: mlx5_ib_add", "siw: device registered",
	} {
		if !IsRDMAKernelMessage(s) {
			t.Errorf("%q not taken as RDMA", s)
		}
	}
	for _, s := range []string{"EXT4-fs (vda): mounted filesystem", "e1000e: eth0 NIC Link is Up", "usb 1-1: new device", "defaults to mlx5core"} {
		if IsRDMAKernelMessage(s) {
			t.Errorf("%q taken as RDMA", s)
		}
	}
}

// TestKeepRDMABounds: only RDMA lines, the newest within the age, line and
// byte bounds, oldest first.
func TestKeepRDMABounds(t *testing.T) {
	now := 30 * 24 * time.Hour
	recs := []KernelRecord{
		{Level: 6, Time: time.Second, Text: "mlx5_core 0000:3b:00.0: ancient"},
		{Level: 6, Time: now - time.Hour, Text: "EXT4-fs (vda): mounted filesystem"},
		{Level: 3, Time: now - time.Minute, Text: "mlx5_core 0000:3b:00.0: recent"},
		{Level: 6, Time: -1, Text: "rdma_rxe: no timestamp"},
	}
	got := KeepRDMA(recs, now)
	if strings.Join(got, "|") != "[2591940.000000] mlx5_core 0000:3b:00.0: recent|rdma_rxe: no timestamp" {
		t.Errorf("kept %q", got)
	}
	var many []KernelRecord
	for i := range 3 * KernelLogMaxLines {
		many = append(many, KernelRecord{Time: time.Duration(i) * time.Millisecond, Text: fmt.Sprintf("rdma_rxe: line %d %s", i, strings.Repeat("x", 150))})
	}
	got = KeepRDMA(many, 0)
	size := 0
	for _, l := range got {
		size += len(l) + 1
	}
	if len(got) == 0 || len(got) > KernelLogMaxLines || size > KernelLogMaxBytes || !strings.Contains(got[len(got)-1], fmt.Sprintf("line %d ", len(many)-1)) {
		t.Errorf("kept %d lines, %d bytes, last %q", len(got), size, got[len(got)-1])
	}
}

// TestKernelLogOfASnapshotRoot: a snapshot root's kernel.log is read as its
// lines; without one, the reason the capture recorded is given.
func TestKernelLogOfASnapshotRoot(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, KernelLogFile), []byte("[    1.000000] rdma_rxe: loaded\n[    2.000000] rxe0: added\n"), 0o644)
	h, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if l, err := h.KernelLog(); err != nil || len(l) != 2 || l[1] != "[    2.000000] rxe0: added" {
		t.Errorf("lines %q, err %v", l, err)
	}
	none := t.TempDir()
	os.WriteFile(filepath.Join(none, FactsFile), []byte(`{"schema":"`+FactsSchema+`","unavailable":{"kernel_log":"open /dev/kmsg: permission denied"}}`), 0o644)
	h2, err := Open(none)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	if _, err := h2.KernelLog(); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("err %v, want the capture's reason", err)
	}
}

// TestLiveKernelLog writes a marker in the RDMA stack's style into the
// kernel log (root only: /dev/kmsg takes writes from root) and reads it back
// through the live reader.
func TestLiveKernelLog(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("writing a marker into the kernel log needs root")
	}
	w, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no writable /dev/kmsg: %v", err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	marker := "rdma_rxe: rdmadoctor test marker " + hex.EncodeToString(b)
	_, err = w.Write([]byte("<6>" + marker + "\n"))
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	lines, err := OpenLive().KernelLog()
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) == 0 || !strings.HasSuffix(lines[len(lines)-1], marker) {
		t.Errorf("marker %q not the last RDMA line: %q", marker, lines)
	}
	if recs, err := readSyslogAll(); err == nil && !strings.Contains(fmt.Sprint(recs), marker) {
		t.Errorf("syslog(2) does not hold the marker")
	}
}

func FuzzParseKmsgRecord(f *testing.F) {
	f.Add([]byte("6,339,5140900,-;NET: Registered protocol family 10\n SUBSYSTEM=net\n"))
	f.Add([]byte("3,1,18446744073709551615,-;x"))
	f.Add([]byte(";"))
	for _, tc := range kmsgRecords {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, ok := ParseKmsgRecord(b)
		if ok && (r.Time < 0 || r.Level < 0 || r.Level > 7 || r.Facility < 0 || strings.Contains(r.Text, "\n")) {
			t.Fatalf("bad record %+v", r)
		}
		_ = r.String()
	})
}

func FuzzParseSyslogBuffer(f *testing.F) {
	f.Add([]byte("<6>[    3.141592] rdma_rxe: loaded\n<4>[99999999999.1] x\n"))
	f.Add([]byte("<>[]\n<9999999999999999999>[ 1.0000000001] y"))
	f.Fuzz(func(t *testing.T, b []byte) {
		recs := ParseSyslogBuffer(b)
		if len(recs) > strings.Count(string(b), "\n")+1 {
			t.Fatalf("%d records from %d lines", len(recs), strings.Count(string(b), "\n")+1)
		}
		_ = KeepRDMA(recs, time.Hour)
	})
}
