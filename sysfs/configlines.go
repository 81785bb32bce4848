package sysfs

import (
	"bufio"
	"bytes"
	"strings"
)

// configLines walks a '#'-commented configuration file (limits.conf,
// slurm.conf) line by line: fn gets the line number, the line without its
// comment and surrounding blanks (blank lines are skipped), and the raw
// line for messages. Lines are bounded at 1 MiB; a longer one ends the walk
// with the scanner's error.
func configLines(data []byte, fn func(n int, line, raw string)) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		s := sc.Text()
		if i := strings.IndexByte(s, '#'); i >= 0 {
			s = s[:i]
		}
		if s = strings.TrimSpace(s); s != "" {
			fn(n, s, sc.Text())
		}
	}
	return sc.Err()
}
