package verbs

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestLayoutMatchesHeader compiles a C program against the real
// <infiniband/verbs.h> that prints every size, offset and enum value the Go
// mirrors rely on, and compares. Without gcc or the header (libibverbs-dev)
// it skips, except in CI, where it must run.
func TestLayoutMatchesHeader(t *testing.T) {
	n := compareWithHeader(t, "infiniband/verbs.h", "libibverbs-dev", MirrorLayout())
	t.Logf("compared %d sizes, offsets and enum values with <infiniband/verbs.h>", n)
}

// compareWithHeader compiles a C program that prints every entry's C
// expression against <header> and compares each value with the Go one.
// It returns the number of entries compared.
func compareWithHeader(t *testing.T, header, pkg string, entries []LayoutEntry) int {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		skipOrFail(t, "gcc not found: install gcc and "+pkg+" to run the layout test")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "layout.c")
	bin := filepath.Join(dir, "layout")
	var prog bytes.Buffer
	fmt.Fprintf(&prog, "#include <stdio.h>\n#include <stddef.h>\n#include <%s>\nint main(void) {\n", header)
	for _, e := range entries {
		fmt.Fprintf(&prog, "\tprintf(\"%%lld\\n\", (long long)(%s));\n", e.C)
	}
	prog.WriteString("\treturn 0;\n}\n")
	if err := os.WriteFile(src, prog.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(gcc, "-std=gnu11", "-o", bin, src).CombinedOutput()
	if err != nil {
		if bytes.Contains(out, []byte(header)) && bytes.Contains(out, []byte("No such file")) {
			skipOrFail(t, "<"+header+"> not found: install "+pkg+" to run the layout test")
		}
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	out, err = exec.Command(bin).Output()
	if err != nil {
		t.Fatalf("run layout program: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(entries) {
		t.Fatalf("layout program printed %d values, want %d", len(lines), len(entries))
	}
	for i, e := range entries {
		c, err := strconv.ParseInt(lines[i], 10, 64)
		if err != nil {
			t.Fatalf("%s: bad output %q", e.C, lines[i])
		}
		if c != e.Go {
			t.Errorf("%s: C says %d, Go mirror says %d", e.C, c, e.Go)
		}
	}
	return len(entries)
}

func skipOrFail(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(msg + " (CI is set: this test must run)")
	}
	t.Skip(msg)
}

func TestLayoutEntriesUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range MirrorLayout() {
		if seen[e.C] {
			t.Errorf("duplicate layout entry %s", e.C)
		}
		seen[e.C] = true
	}
}

// The GID union must be 8-byte aligned wherever it is embedded, or every
// struct after it (ah_attr inside qp_attr) shifts.
func TestGIDAlignment(t *testing.T) {
	if a := unsafe.Alignof(GID{}); a != 8 {
		t.Fatalf("GID alignment %d, want 8", a)
	}
	var e GIDEntry
	if unsafe.Offsetof(e.GIDIndex) != 16 || unsafe.Sizeof(e) != 32 {
		t.Fatalf("GIDEntry layout: gid_index at %d, size %d", unsafe.Offsetof(e.GIDIndex), unsafe.Sizeof(e))
	}
	var qa QPAttr
	if unsafe.Offsetof(qa.AHAttr)%8 != 0 || unsafe.Offsetof(qa.AltAHAttr)%8 != 0 {
		t.Fatalf("ah_attr members not 8-byte aligned in QPAttr: %d, %d",
			unsafe.Offsetof(qa.AHAttr), unsafe.Offsetof(qa.AltAHAttr))
	}
}
