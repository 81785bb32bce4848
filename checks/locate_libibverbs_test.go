package checks_test

import (
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// LocateLibibverbs names the copy the loader would open, as
// libibverbs.install judges it: the first good one in loader order, none
// when the library is missing or only a dangling link is left.
func TestLocateLibibverbs(t *testing.T) {
	for _, c := range []struct{ host, path, file string }{
		{"cx5-roce-healthy", "/usr/lib/x86_64-linux-gnu/libibverbs.so.1", "/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0"},
		{"libibverbs-two-copies", "/usr/lib64/libibverbs.so.1", "/usr/lib64/libibverbs.so.1.14.56.0"},
		{"libibverbs-missing", "", ""},
		{"libibverbs-dangling-link", "", ""},
	} {
		h, err := sysfs.Open("../testdata/hosts/" + c.host)
		if err != nil {
			t.Fatal(err)
		}
		p, f := checks.LocateLibibverbs(h, "")
		if p != c.path || f != c.file {
			t.Errorf("%s: got (%q, %q), want (%q, %q)", c.host, p, f, c.path, c.file)
		}
	}
}
