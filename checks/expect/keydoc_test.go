package expect

import (
	"regexp"
	"strings"
	"testing"
)

// TestKeyDocs: every documented key parses with its example, and every key
// the parser names in its "valid:" lists is documented.
func TestKeyDocs(t *testing.T) {
	documented := map[string]bool{}
	for _, d := range KeyDocs {
		key := strings.NewReplacer("<glob>", "mlx5_*", "<n>", "1", "<counter>", "symbol_error").Replace(d.Key)
		text := "[class c]\n"
		if d.Key != "hosts" {
			text += "hosts = *\n"
		}
		if d.Key == "waive" {
			text += "waive_reason = \"x\"\n"
		}
		text += key + " = " + d.Example + "\n"
		if _, err := Parse("expect.conf", strings.NewReader(text)); err != nil {
			t.Errorf("%s = %s: %v", d.Key, d.Example, err)
		}
		name := d.Key[strings.LastIndexAny(d.Key, ".")+1:]
		documented[name] = true
		if d.Meaning == "" || d.Scope == "" {
			t.Errorf("%s: no scope or meaning", d.Key)
		}
	}
	// The parser's own lists of valid keys.
	for _, list := range []string{classKeys, "fw, pcie_speed, pcie_width, ports", "link_layer, rate, width, mtu, pfc_priority, unused"} {
		for _, k := range regexp.MustCompile(`[a-z_]+`).FindAllString(list, -1) {
			if k == "or" || k == "counters" || k == "device" || k == "glob" || k == "key" || k == "port" || k == "counter" {
				continue
			}
			if !documented[k] {
				t.Errorf("key %s is not in KeyDocs", k)
			}
		}
	}
}
