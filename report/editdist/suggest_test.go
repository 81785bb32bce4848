package editdist

import (
	"strings"
	"testing"
)

func TestDistance(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"port-down", "port-down", 0},
		{"port-dwn", "port-down", 1},
		{"cx5-roce-helthy", "cx5-roce-healthy", 1},
		{"abc", "xyz", 3},
		{"a", "abcdefgh", 4}, // over the limit: limit+1
		{strings.Repeat("a", 300), strings.Repeat("a", 300), 4},
	}
	for _, c := range cases {
		if got := Distance(c.a, c.b, 3); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
