package checks_test

import (
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/checks/expect"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// Each optics fixture gets the verdict, finding and exit code its comment
// states (sysfs/sysfstest/fixtures_optics.go).
func TestOpticsFixtureVerdicts(t *testing.T) {
	names := make([]string, 0, len(sysfstest.OpticsVerdicts))
	for n := range sysfstest.OpticsVerdicts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		want := sysfstest.OpticsVerdicts[name]
		t.Run(name, func(t *testing.T) {
			r := hwRun(t, netFixture(name), checks.Options{})
			statedVerdict(t, r, "link.optics", want.Status, want.Finding, want.Exit)
		})
	}
}

// withModule is the QSFP28 host with ens1f1np1's module replaced.
func withModule(t *testing.T, m sysfs.ModuleEEPROM) string {
	return fixtureEdited(t, "optics-qsfp28-healthy", func(tr *sysfstest.Tree) { tr.Facts.ModuleEEPROMs["ens1f1np1"] = m })
}

// qsfp28With is the healthy SR4 with its readings edited.
func qsfp28With(edit func(r *sysfstest.OpticReadings)) sysfs.ModuleEEPROM {
	r := sysfstest.MMA1B00Readings()
	edit(&r)
	return sysfstest.QSFP28(sysfstest.ModuleID{Vendor: "Mellanox", Part: "MMA1B00-C100D", Rev: "A2", Serial: "MT2034FT01307"}, r, sysfstest.MMA1B00Limits)
}

// lowerOnly is a module of which only the lower page was read.
func lowerOnly(b ...byte) sysfs.ModuleEEPROM {
	lower := append(b, make([]byte, sysfs.ModuleHalfPage-len(b))...)
	return sysfs.ModuleEEPROM{Pages: []sysfs.ModulePage{sysfs.NewModulePage(sysfs.ModuleI2CA0, 0, 0, 0, lower)}}
}

// classWith is a class with the given port keys for every port.
func classWith(t *testing.T, kv ...string) *expect.Class {
	c, err := expect.NewClass("optics", []string{"*"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if err := c.Set(kv[i], kv[i+1], ""); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// TestLinkOpticsFindings: each host gives the findings named, unit by unit.
func TestLinkOpticsFindings(t *testing.T) {
	ok0 := findingRef{"link.optics/ok", "ens1f0np0"}
	one := func(id string) []findingRef { return []findingRef{ok0, {"link.optics/" + id, "ens1f1np1"}} }
	sfpNoDDM := lowerOnly(0x03)
	noPage3 := sysfstest.QSFP28(sysfstest.ModuleID{Vendor: "Mellanox"}, sysfstest.MMA1B00Readings(), sysfstest.MMA1B00Limits)
	noPage3.Pages = noPage3.Pages[:2]
	for _, tc := range []struct {
		name string
		dir  string
		opts checks.Options
		want []findingRef
	}{
		{"healthy SR4", netFixture("optics-qsfp28-healthy"), checks.Options{}, []findingRef{ok0, {"link.optics/ok", "ens1f1np1"}}},
		{"DAC", netFixture("optics-dac"), checks.Options{}, []findingRef{{"link.optics/copper", "ens1f0np0"}, {"link.optics/copper", "ens1f1np1"}}},
		{"Rx low alarm", netFixture("optics-rx-low-alarm"), checks.Options{}, one("rx-power-alarm")},
		{"hot CMIS module", netFixture("optics-cmis-hot"), checks.Options{},
			[]findingRef{{"link.optics/temp-warning", "ens1f0np0"}, {"link.optics/ok", "ens1f1np1"}}},
		{"virtio netdev", netFixture("optics-no-module"), checks.Options{}, []findingRef{{"link.optics/no-module-support", "enp0s3"}}},
		{"snapshot without modules", netFixture("cx5-roce-healthy"), checks.Options{}, []findingRef{{"link.optics/not-captured", ""}}},
		{"module of one netdev not recorded", fixtureEdited(t, "optics-qsfp28-healthy", func(tr *sysfstest.Tree) {
			delete(tr.Facts.ModuleEEPROMs, "ens1f1np1")
		}), checks.Options{}, one("not-recorded")},
		{"one port unused on purpose", netFixture("optics-rx-low-alarm"), checks.Options{Expect: classWith(t, "mlx5_1/1.unused", "true")}, []findingRef{ok0}},
		{"InfiniBand without IPoIB", netFixture("cx6-ib-healthy"), checks.Options{}, []findingRef{{"link.optics/no-port", ""}}},
		{"no thresholds", withModule(t, sysfstest.QSFP28(sysfstest.ModuleID{}, sysfstest.MMA1B00Readings(), sysfstest.OpticLimits{})), checks.Options{}, one("no-thresholds")},
		{"SFP without diagnostics", withModule(t, sfpNoDDM), checks.Options{}, one("no-diagnostics")},
		{"module at 80 °C", withModule(t, qsfp28With(func(r *sysfstest.OpticReadings) { r.TempC = 80 })), checks.Options{}, one("temp-alarm")},
		{"Vcc past alarm", withModule(t, qsfp28With(func(r *sysfstest.OpticReadings) { r.Vcc = 3.7 })), checks.Options{}, one("vcc-alarm")},
		{"Vcc past warning", withModule(t, qsfp28With(func(r *sysfstest.OpticReadings) { r.Vcc = 3.5 })), checks.Options{}, one("vcc-warning")},
		{"Rx low warning", withModule(t, qsfp28With(func(r *sysfstest.OpticReadings) { r.RxMW[1] = sysfstest.DBmToMW(-11) })), checks.Options{}, one("rx-power-warning")},
		{"Tx low alarm", withModule(t, qsfp28With(func(r *sysfstest.OpticReadings) { r.TxMW[0] = 0.1 })), checks.Options{}, one("tx-power-alarm")},
		{"Tx low warning", withModule(t, qsfp28With(func(r *sysfstest.OpticReadings) { r.TxMW[3] = 0.16 })), checks.Options{}, one("tx-power-warning")},
		{"bias alarm", withModule(t, qsfp28With(func(r *sysfstest.OpticReadings) { r.BiasMA[2] = 10.5 })), checks.Options{}, one("tx-bias-alarm")},
		{"bias warning", withModule(t, qsfp28With(func(r *sysfstest.OpticReadings) { r.BiasMA[2] = 9 })), checks.Options{}, one("tx-bias-warning")},
		{"EIO with link", withModule(t, sysfs.ModuleEEPROM{Err: "EIO"}), checks.Options{}, one("eeprom-unreadable")},
		{"EPERM", withModule(t, sysfs.ModuleEEPROM{Err: "EPERM"}), checks.Options{}, one("no-privilege")},
		{"page 03h missing", withModule(t, noPage3), checks.Options{}, one("eeprom-malformed")},
		{"CFP identifier", withModule(t, lowerOnly(0x0e)), checks.Options{}, one("identifier-unknown")},
		{"blank lower page", withModule(t, lowerOnly(0x00)), checks.Options{}, one("eeprom-malformed")},
		{"empty cage, no carrier", fixtureEdited(t, "optics-qsfp28-healthy", func(tr *sysfstest.Tree) {
			tr.Facts.ModuleEEPROMs["ens1f1np1"] = sysfs.ModuleEEPROM{Err: "EIO"}
			for i := range tr.Facts.Netdevs {
				if tr.Facts.Netdevs[i].Name == "ens1f1np1" {
					tr.Facts.Netdevs[i].Carrier = false
				}
			}
		}), checks.Options{}, one("no-module-link-down")},
		{"pinned vendor and part", netFixture("optics-qsfp28-healthy"),
			checks.Options{Expect: classWith(t, "mlx5_1/1.module_vendor", "Finisar", "mlx5_1/1.module_part", "FTLC9558REPM")},
			[]findingRef{ok0, {"link.optics/vendor-deviates", "ens1f1np1"}, {"link.optics/part-deviates", "ens1f1np1"}, {"link.optics/ok", "ens1f1np1"}}},
		{"pinned firmware", netFixture("optics-cmis-hot"), checks.Options{Expect: classWith(t, "mlx5_*/*.module_firmware", "47.*")},
			[]findingRef{{"link.optics/firmware-deviates", "ens1f0np0"}, {"link.optics/temp-warning", "ens1f0np0"},
				{"link.optics/firmware-deviates", "ens1f1np1"}, {"link.optics/ok", "ens1f1np1"}}},
		{"pins matched", netFixture("optics-cmis-hot"),
			checks.Options{Expect: classWith(t, "*/*.module_vendor", "NVIDIA", "*/*.module_part", "MMA4Z00-*", "*/*.module_firmware", "46.120")},
			[]findingRef{{"link.optics/temp-warning", "ens1f0np0"}, {"link.optics/ok", "ens1f1np1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := hwResult(t, hwRun(t, tc.dir, tc.opts, "link.optics"), "link.optics")
			if d := cmp.Diff(tc.want, refs(c.Findings)); d != "" {
				t.Errorf("findings (-want +got):\n%s\n%s", d, c.Summary)
			}
		})
	}
}

// The finding a technician acts on names the port, the module's vendor,
// part and serial and the lane, and says what to clean or replace.
func TestLinkOpticsWording(t *testing.T) {
	c := hwResult(t, hwRun(t, netFixture("optics-rx-low-alarm"), checks.Options{}, "link.optics"), "link.optics")
	for _, want := range []string{"mlx5_1 port 1 (ens1f1np1)", "Mellanox MMA1B00-C100D SN MT2034FT01307", "lane 3", "-16.80 dBm", "below its low alarm", "-13.30 dBm"} {
		if !strings.Contains(c.Summary, want) {
			t.Errorf("summary lacks %q: %s", want, c.Summary)
		}
	}
	if !strings.Contains(c.Remedy, "clean both ends of the fibre") || !strings.Contains(c.Remedy, "far-end transceiver") {
		t.Errorf("remedy does not say to clean the fibre or replace the far end: %s", c.Remedy)
	}
	hot := hwResult(t, hwRun(t, netFixture("optics-cmis-hot"), checks.Options{}, "link.optics"), "link.optics")
	if !strings.Contains(hot.Summary, "65.0 °C, above its high warning 60.0 °C") || !strings.Contains(hot.Remedy, "airflow") {
		t.Errorf("hot module: %s\n%s", hot.Summary, hot.Remedy)
	}
	dac := hwResult(t, hwRun(t, netFixture("optics-dac"), checks.Options{}, "link.optics"), "link.optics")
	if !strings.Contains(dac.Summary, "MCP1600-C003") || !strings.Contains(dac.Summary, "DAC") {
		t.Errorf("DAC pass does not name the cable: %s", dac.Summary)
	}
}

// The inventory names each netdev's module: what to order, what is on
// the label; a snapshot without modules names none.
func TestInventoryModules(t *testing.T) {
	inv := func(name string) map[string]*report.Module {
		h, err := sysfs.Open(netFixture(name))
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		out := map[string]*report.Module{}
		for _, nd := range checks.Inventory(checks.NewEnv(h, checks.Options{Level: 1})).Netdevs {
			out[nd.Name] = nd.Module
		}
		return out
	}
	got := inv("optics-cmis-hot")
	want := &report.Module{Form: "OSFP", Spec: "CMIS 5.0", Media: "optical", Vendor: "NVIDIA", Part: "MMA4Z00-NS", Revision: "A5",
		Serial: "MT2410FT09876", Firmware: "46.120"}
	if d := cmp.Diff(want, got["ens1f0np0"]); d != "" {
		t.Errorf("ens1f0np0 module (-want +got):\n%s", d)
	}
	if dac := inv("optics-dac")["ens1f1np1"]; dac == nil || dac.Part != "MCP1600-C003" || dac.Media != "passive copper" {
		t.Errorf("DAC in the inventory: %+v", dac)
	}
	for nd, m := range inv("cx5-roce-healthy") {
		if m != nil {
			t.Errorf("%s: module %+v from a snapshot that recorded none", nd, m)
		}
	}
}

// expect --from-host offers each port's module as commented pins; the
// class with them uncommented matches the host it was written from.
func TestExpectFromHostOffersModulePins(t *testing.T) {
	dir := netFixture("optics-cmis-hot")
	_, text, err := classFromHost(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# mlx5_0/1.module_vendor = NVIDIA", "# mlx5_0/1.module_part = MMA4Z00-NS", "# mlx5_1/1.module_firmware = 46.120"} {
		if !strings.Contains(text, want) {
			t.Errorf("the written class lacks %q:\n%s", want, text)
		}
	}
	uncommented := strings.NewReplacer("# mlx5_0/1.module", "mlx5_0/1.module", "# mlx5_1/1.module", "mlx5_1/1.module").Replace(text)
	f, err := expect.Parse("expect.conf", strings.NewReader(uncommented))
	if err != nil {
		t.Fatalf("uncommented pins do not parse: %v\n%s", err, uncommented)
	}
	class, err := checks.ExpectClassFor(f, "cx7-roce-node02")
	if err != nil {
		t.Fatal(err)
	}
	c := hwResult(t, hwRun(t, dir, checks.Options{Expect: class}, "link.optics"), "link.optics")
	for _, f := range c.Findings {
		if strings.HasSuffix(f.ID, "-deviates") {
			t.Errorf("the host deviates from its own pins: %s %s", f.ID, f.Message)
		}
	}
}
