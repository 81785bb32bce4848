package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/rdmadoctor/rdmadoctor/report"
)

// inventoryFixtures: RoCE, InfiniBand, a NIC without its RDMA device, a
// port without an IP, and the snapshot of a real SoftRoCE host.
var inventoryFixtures = []string{"cx5-roce-healthy", "cx6-ib-healthy", "mlx5-vfio-passthrough", "roce-no-ip", "rxe-vm-captured"}

// TestInventoryText keeps `rdmadoctor inventory` equal to the golden files
// (testdata/golden/NAME.inventory.txt) and within 100 columns.
func TestInventoryText(t *testing.T) {
	t.Setenv("COLUMNS", "100")
	for _, name := range inventoryFixtures {
		code, out, errOut := runAtRepoRoot(t, "inventory", "--root", "testdata/hosts/"+name)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, errOut)
		}
		out = strings.Replace(out, "rdmadoctor "+version, "rdmadoctor golden", 1)
		for _, l := range strings.Split(out, "\n") {
			if len(l) > 100 {
				t.Errorf("%s: a line of %d bytes: %q", name, len(l), l)
			}
		}
		checkGolden(t, name+".inventory.txt", []byte(out))
	}
}

// TestInventoryJSONIsTheReportsInventory: `inventory --format json` holds
// the very inventory the health report carries, valid against the report
// schema's definition of it.
func TestInventoryJSONIsTheReportsInventory(t *testing.T) {
	c := jsonschema.NewCompiler()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(report.JSONSchema))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("report.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	invSchema, err := c.Compile("report.schema.json#/$defs/inventory")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range inventoryFixtures {
		root := filepath.Join(hostsDir, name)
		code, out, errOut := runCLI(t, "inventory", "--root", root, "--format", "json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, errOut)
		}
		var inv struct {
			Schema    string          `json:"schema"`
			Host      report.HostInfo `json:"host"`
			Inventory json.RawMessage `json:"inventory"`
		}
		if err := json.Unmarshal([]byte(out), &inv); err != nil {
			t.Fatal(err)
		}
		if inv.Schema != report.InventorySchema || inv.Host.Root != root {
			t.Errorf("%s: schema %q host %+v", name, inv.Schema, inv.Host)
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(inv.Inventory))
		if err != nil {
			t.Fatal(err)
		}
		if err := invSchema.Validate(inst); err != nil {
			t.Errorf("%s: inventory does not match the schema: %v", name, err)
		}
		_, rep, _ := runCLI(t, "--root", root, "--level", "1", "--format", "json")
		var full struct {
			Inventory any `json:"inventory"`
		}
		var mine any
		json.Unmarshal([]byte(rep), &full)
		json.Unmarshal(inv.Inventory, &mine)
		if !reflect.DeepEqual(full.Inventory, mine) {
			t.Errorf("%s: inventory differs from the report's", name)
		}
	}
}

func TestInventoryUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"inventory", "--format", "xml"},
		{"inventory", "extra"},
		{"inventory", "--bogus"},
		{"inventory", "--root", hostsDir},
	} {
		code, out, errOut := runCLI(t, args...)
		if code != report.ExitUsage || out != "" || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and one line", args, code, out, errOut)
		}
	}
}
