package report

import (
	"bytes"
	"strings"
	"testing"
)

func TestTextNamesTheExpectations(t *testing.T) {
	for _, tc := range []struct {
		expect *ExpectInfo
		want   string
	}{
		{&ExpectInfo{File: "/etc/rdmadoctor/expect.conf", Class: "cx5-roce"}, "  expect class cx5-roce (/etc/rdmadoctor/expect.conf)\n"},
		{&ExpectInfo{File: "/etc/rdmadoctor/expect.conf"}, "  expect /etc/rdmadoctor/expect.conf (no class for this host)\n"},
		{&ExpectInfo{File: "e\x1b[2J.conf", Class: "c"}, `expect class c (e\x1b[2J.conf)`},
		{nil, "level 1\n"},
	} {
		r := &Report{Level: 1, Host: HostInfo{Hostname: "n1", Expect: tc.expect}}
		r.Finish(false)
		var b bytes.Buffer
		if err := WriteText(&b, r, TextOptions{}); err != nil {
			t.Fatal(err)
		}
		first, _, _ := strings.Cut(b.String(), "\n")
		if !strings.Contains(first+"\n", tc.want) || strings.Contains(first, "\x1b") {
			t.Errorf("header %q does not say %q", first, tc.want)
		}
	}
}
