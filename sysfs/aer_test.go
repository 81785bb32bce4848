package sysfs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// aerCorrectableNow is aer_dev_correctable as aer.c's aer_stats_dev_attr
// prints it today: every named bit of aer_correctable_error_string, then
// the total.
const aerCorrectableNow = "RxErr 3\nBadTLP 1\nBadDLLP 0\nRollover 0\nTimeout 2\nNonFatalErr 0\nCorrIntErr 0\nHeaderOF 0\nTOTAL_ERR_COR 5\n"

// aerCorrectable419 is the sample output of the ABI document
// (sysfs-bus-pci-devices-aer_stats) from the 4.19 kernels: long names.
const aerCorrectable419 = "Receiver Error 2\nBad TLP 0\nBad DLLP 0\nRELAY_NUM Rollover 0\nReplay Timer Timeout 0\n" +
	"Advisory Non-Fatal 0\nCorrected Internal Error 0\nHeader Log Overflow 0\nTOTAL_ERR_COR 2\n"

func TestParseAERStats(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     sysfs.AERStats
		err      string
	}{
		{"current kernel", aerCorrectableNow, sysfs.AERStats{Counts: []sysfs.AERCount{{"RxErr", 3}, {"BadTLP", 1}, {"BadDLLP", 0}, {"Rollover", 0},
			{"Timeout", 2}, {"NonFatalErr", 0}, {"CorrIntErr", 0}, {"HeaderOF", 0}}, Total: 5, HasTotal: true}, ""},
		{"4.19's long names map to the short ones", aerCorrectable419, sysfs.AERStats{Counts: []sysfs.AERCount{{"RxErr", 2}, {"BadTLP", 0},
			{"BadDLLP", 0}, {"Rollover", 0}, {"Timeout", 0}, {"NonFatalErr", 0}, {"CorrIntErr", 0}, {"HeaderOF", 0}}, Total: 2, HasTotal: true}, ""},
		{"an unnamed bit set", "Undefined 0\nDLP 0\ndev_nonfatal_errs_bit[7] 4\nCmpltTO 1\nTOTAL_ERR_NONFATAL 2\n",
			sysfs.AERStats{Counts: []sysfs.AERCount{{"Undefined", 0}, {"DLP", 0}, {"dev_nonfatal_errs_bit[7]", 4}, {"CmpltTO", 1}}, Total: 2, HasTotal: true}, ""},
		{"empty", "\n", sysfs.AERStats{}, "empty"},
		{"no total", "RxErr 1\n", sysfs.AERStats{}, "no TOTAL_ERR_ line"},
		{"two totals", "TOTAL_ERR_COR 1\nTOTAL_ERR_COR 2\n", sysfs.AERStats{}, "line 2: a second TOTAL_ERR_COR"},
		{"name twice", "RxErr 1\nRxErr 2\nTOTAL_ERR_COR 2\n", sysfs.AERStats{}, "line 2: RxErr given twice"},
		{"count not a number", "RxErr -1\nTOTAL_ERR_COR 0\n", sysfs.AERStats{}, `line 1: "RxErr -1": the count is not a number`},
		{"count beyond 64 bits", "RxErr 18446744073709551616\nTOTAL_ERR_COR 0\n", sysfs.AERStats{}, "the count is not a number"},
		{"name alone", "RxErr\nTOTAL_ERR_COR 0\n", sysfs.AERStats{}, `line 1: "RxErr" is not "NAME COUNT"`},
		{"too long", strings.Repeat("RxErr 1\n", 65), sysfs.AERStats{}, "65 lines"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sysfs.ParseAERStats(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("-want +got\n%s", d)
			}
		})
	}
}

func TestReadAER(t *testing.T) {
	root := t.TempDir()
	dir := "/sys/devices/pci0000:15/0000:15:01.0"
	put := func(name, v string) {
		p := filepath.Join(root, dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("aer_dev_correctable", aerCorrectableNow)
	put("aer_dev_nonfatal", "Undefined 0\nTOTAL_ERR_NONFATAL 0\n")
	put("aer_dev_fatal", "garbage\n")
	put("aer_rootport_total_err_cor", "7\n")
	put("aer_rootport_total_err_fatal", "x\n")
	h, err := sysfs.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	d := h.ReadAER("0000:15:01.0", dir)
	if !d.Exposed() || d.Stats["aer_dev_correctable"].Count("Timeout") != 2 || d.Stats["aer_dev_nonfatal"].Total != 0 {
		t.Errorf("stats read: %+v", d.Stats)
	}
	if d.RootPort["aer_rootport_total_err_cor"] != 7 || len(d.RootPort) != 1 {
		t.Errorf("root port totals: %v", d.RootPort)
	}
	shown := root + dir
	want := []string{"parse " + shown + "/aer_dev_fatal: line 1: \"garbage\" is not \"NAME COUNT\"",
		"parse " + shown + "/aer_rootport_total_err_fatal: \"x\" is not a count"}
	if diff := cmp.Diff(want, d.Problems); diff != "" {
		t.Errorf("problems name the path (-want +got):\n%s", diff)
	}
	if none := h.ReadAER("0000:00:00.0", "/sys/devices/pci0000:00/0000:00:00.0"); none.Exposed() {
		t.Errorf("a function without the files: %+v", none)
	}
}

func FuzzParseAERStats(f *testing.F) {
	for _, s := range []string{aerCorrectableNow, aerCorrectable419, "TOTAL_ERR_FATAL 0\n", "dev_cor_errs_bit[9] 1\nTOTAL_ERR_COR 1", "RxErr 1 2\n", " \n\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		st, err := sysfs.ParseAERStats(s)
		if err != nil {
			return
		}
		if !st.HasTotal || len(st.Counts) > 64 {
			t.Fatalf("ParseAERStats(%q) = %+v", s, st)
		}
		seen := map[string]bool{}
		for _, c := range st.Counts {
			if c.Name == "" || strings.ContainsAny(c.Name, " \t\n") || seen[c.Name] {
				t.Fatalf("ParseAERStats(%q): bad or repeated name %q", s, c.Name)
			}
			seen[c.Name] = true
		}
	})
}
