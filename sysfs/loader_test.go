package sysfs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

func TestFollowLinks(t *testing.T) {
	tr := sysfstest.NewTree()
	lib := "/usr/lib/x86_64-linux-gnu"
	tr.File(lib+"/libibverbs.so.1.14.44.0", "\x7fELF\x02rest")
	tr.Link(lib+"/libibverbs.so.1", "libibverbs.so.1.14.44.0")
	tr.Link(lib+"/libgone.so.1", "libgone.so.1.0")
	tr.Link(lib+"/loop-a", "loop-b")
	tr.Link(lib+"/loop-b", "loop-a")
	tr.Link("/lib", "usr/lib") // merged /usr
	tr.Link("/usr/lib64/libibverbs.so.1", "/usr/lib/x86_64-linux-gnu/libibverbs.so.1")
	tr.Dir(lib + "/libibverbs")
	h := writeTree(t, tr)

	c := h.FollowLinks(lib + "/libibverbs.so.1")
	if !c.OK() || c.Final != lib+"/libibverbs.so.1.14.44.0" || len(c.Hops) != 2 {
		t.Fatalf("chain = %+v", c)
	}
	abs := h.FollowLinks("/usr/lib64/libibverbs.so.1")
	if !abs.OK() || len(abs.Hops) != 3 {
		t.Fatalf("absolute link chain = %+v", abs)
	}
	merged := h.FollowLinks("/lib/x86_64-linux-gnu/libibverbs.so.1")
	if !merged.OK() || !sysfs.SameFile(c, merged) || !sysfs.SameFile(c, abs) {
		t.Errorf("the same file through /lib → usr/lib and an absolute link must be one file: %+v %+v", merged, abs)
	}
	if d := h.FollowLinks(lib + "/libgone.so.1"); !d.Dangling || d.OK() || !strings.Contains(d.Err.Error(), "libgone.so.1.0") {
		t.Errorf("dangling chain = %+v", d)
	}
	if a := h.FollowLinks(lib + "/libnothing.so.1"); !a.Absent || a.Dangling {
		t.Errorf("absent chain = %+v", a)
	}
	if l := h.FollowLinks(lib + "/loop-a"); l.OK() || !strings.Contains(l.Err.Error(), "loop") {
		t.Errorf("loop = %+v", l)
	}
	if d := h.FollowLinks(lib + "/libibverbs"); d.OK() || !strings.Contains(d.Err.Error(), "not a regular file") {
		t.Errorf("directory = %+v", d)
	}
	if cl, err := h.ELFClass(c.Final); err != nil || cl != 64 {
		t.Errorf("ELFClass = %d, %v", cl, err)
	}
}

func TestFollowLinksOnThisHost(t *testing.T) {
	h := sysfs.OpenLive()
	for _, d := range sysfs.StandardLibDirs(sysfs.NativeLDFlags()) {
		p := filepath.Join(d, "libc.so.6")
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		c := h.FollowLinks(p)
		if !c.OK() {
			t.Fatalf("%s: %v", p, c.Err)
		}
		if cl, err := h.ELFClass(c.Final); err != nil || cl == 0 {
			t.Errorf("%s: ELF class %d, %v", c.Final, cl, err)
		}
		return
	}
	t.Skip("no libc.so.6 in the standard directories")
}

func TestParseDriverFile(t *testing.T) {
	names, probs := sysfs.ParseDriverFile([]byte("# rdma-core\ndriver mlx5\n\n  driver\tmlx4 \nfoo bar\ndriver\n"))
	if strings.Join(names, ",") != "mlx5,mlx4" {
		t.Errorf("names = %v", names)
	}
	if len(probs) != 2 {
		t.Errorf("problems = %v, want the unknown key and the bare driver line", probs)
	}
}

func TestProvidersAndConfig(t *testing.T) {
	tr := sysfstest.NewTree()
	tr.Attr("/etc/libibverbs.d/mlx5.driver", "driver mlx5")
	tr.Attr("/etc/libibverbs.d/odd.driver", "drive odd")
	tr.Attr("/etc/libibverbs.d/README", "not a driver file")
	d := "/usr/lib64/libibverbs"
	for _, n := range []string{"libmlx5-rdmav34.so", "libmlx5-rdmav25.so", "libmlx5-rdmav.so", "libmlx5-rdmavX.so", "libmlx4-rdmav34.so", "libmlx5.so"} {
		tr.File(d+"/"+n, "\x7fELF\x02")
	}
	h := writeTree(t, tr)
	conf, probs, err := h.ConfiguredProviders()
	if err != nil || conf["mlx5"] != "/etc/libibverbs.d/mlx5.driver" || len(conf) != 1 || len(probs) != 1 {
		t.Errorf("conf = %v, problems %v, err %v", conf, probs, err)
	}
	files, err := h.ProviderFiles(d, "mlx5")
	if err != nil || len(files) != 2 {
		t.Errorf("provider files = %v, %v; want the rdmav25 and rdmav34 objects only", files, err)
	}
}

func TestOSReleaseFamily(t *testing.T) {
	for in, want := range map[string]string{
		"ID=debian\n":                                     "debian",
		"ID=ubuntu\nID_LIKE=debian\n":                     "debian",
		"ID=\"rocky\"\nID_LIKE=\"rhel centos fedora\"":    "rhel",
		"ID=amzn\n":                                       "rhel",
		"ID=\"opensuse-leap\"\nID_LIKE=\"suse opensuse\"": "suse",
		"ID=sles\n":                                       "suse",
		"ID=arch\n":                                       "",
		"garbage\n=\nID\n":                                "",
	} {
		if got := sysfs.ParseOSRelease([]byte(in)).Family(); got != want {
			t.Errorf("Family(%q) = %q, want %q", in, got, want)
		}
	}
	o := sysfs.ParseOSRelease([]byte("PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nVERSION_ID='12'\n"))
	if o.PrettyName != "Debian GNU/Linux 12 (bookworm)" || o.VersionID != "12" {
		t.Errorf("parsed %+v", o)
	}
}

func FuzzParseDriverFile(f *testing.F) {
	f.Add([]byte("driver mlx5\n"))
	f.Add([]byte("# comment\n\ndriver /opt/lib/libfoo\nbogus\n"))
	f.Add([]byte("driver"))
	f.Fuzz(func(t *testing.T, data []byte) {
		names, _ := sysfs.ParseDriverFile(data)
		for _, n := range names {
			if n == "" || strings.ContainsAny(n, " \t\n") {
				t.Fatalf("bad provider name %q", n)
			}
		}
	})
}

func FuzzParseOSRelease(f *testing.F) {
	f.Add([]byte("ID=debian\nID_LIKE=\"ubuntu debian\"\nPRETTY_NAME=\"x\"\n"))
	f.Add([]byte("ID='a'\nVERSION_ID=\"\\\"\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		o := sysfs.ParseOSRelease(data)
		_ = o.Family()
	})
}
