package checks

import "testing"

// The rdma-core release comes from libibverbs' file name: distributions'
// plain numbers and vendor builds' suffixed ones.
func TestLibibverbsRelease(t *testing.T) {
	for name, want := range map[string]string{
		"libibverbs.so.1.14.44.0":         "44",
		"libibverbs.so.1.11.32.0":         "32",
		"libibverbs.so.1.14.58mlnx43.0":   "58",
		"libibverbs.so.1":                 "",
		"libibverbs.so.1.14.":             "",
		"libibverbs.so.1.14.1234567.0":    "",
		"libmlx5.so.1.24.44.0":            "",
		"libibverbs.so.1.14.2307mlnx47.0": "2307",
	} {
		got := ""
		if m := libibverbsReleaseRE().FindStringSubmatch(name); m != nil {
			got = m[1]
		}
		if got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}
