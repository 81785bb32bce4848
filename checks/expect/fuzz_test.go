package expect

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary text to the parser: it must never panic, and a
// file it accepts must write back to text that parses to the same meaning.
// The seed corpus is in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add(example)
	f.Add("[class a]\nhosts = *\nmlx5_[0-3]/*.rate = 2.5\n")
	f.Add("[class a]\nhosts = n\\*\nx.fw = a b # c\n")
	f.Add("[class a]\nhosts = [\"a*\", \"b\"]\nx.fw = [\"1.*\", 2,]\nx/1.width = [24]X\nfail_on_warn = [port.state]\nx.pcie_speed = \"8*\"\n")
	f.Fuzz(func(t *testing.T, text string) {
		file, err := Parse("fuzz.conf", strings.NewReader(text))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.conf:") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		for _, c := range file.Classes {
			var b bytes.Buffer
			if err := Write(&b, c); err != nil {
				t.Fatalf("accepted class %s does not write: %v\ninput:\n%q", c.Name, err, text)
			}
			back, err := Parse("again.conf", &b)
			if err != nil {
				t.Fatalf("written class does not parse: %v\n%s", err, b.String())
			}
			if got, want := semantics(back.Classes[0]), semantics(c); got != want {
				t.Fatalf("round trip changed the meaning:\ngot\n%s\nwant\n%s\ninput %q", got, want, text)
			}
		}
	})
}
