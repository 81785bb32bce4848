package mad

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The simulator test runs this package against ibsim, the InfiniBand
// fabric simulator (Debian's ibsim-utils), with Debian's opensm as the
// subnet manager: ibsim serves net.2sw2path4hca, opensm attaches as Hca1,
// and a child of this test binary, with libumad2sim.so preloaded, asks as
// Hca2. It skips when ibsim, opensm or libumad2sim.so is not installed.

const simNet = "/usr/share/doc/ibsim-utils/net-examples/net.2sw2path4hca"

var umad2sim = []string{
	"/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so",
	"/usr/lib/aarch64-linux-gnu/umad2sim/libumad2sim.so",
}

// simAnswers is what the child saw, for the parent to judge.
type simAnswers struct {
	Simulated  bool
	Port       Port
	SM         SMInfo
	SM2        SMInfo
	SMName     string
	SMs        []SMInfoRecord
	PKeys      []uint16
	Path       PathRecord
	Neighbour  NodeInfo
	NeighDesc  string
	NeighPort  PortInfo
	Counters   PortCounters
	SilentErr  string
	SilentTook time.Duration
	Errors     []string
}

// TestSimChild is the child's side: it runs only when the parent sets
// MAD_SIM_CHILD, with libumad2sim.so preloaded.
func TestSimChild(t *testing.T) {
	out := os.Getenv("MAD_SIM_CHILD")
	if out == "" {
		t.Skip("runs only as TestSimulator's child")
	}
	a := askSim(os.Getenv("MAD_SIM_SILENT") != "")
	b, _ := json.Marshal(a)
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// Free the child's ibsim client slot (ibsim has 10): the parent
	// starts several children against one simulator.
	Exit(0)
}

func askSim(silent bool) simAnswers {
	a := simAnswers{Simulated: Simulated()}
	fail := func(what string, err error) bool {
		if err != nil {
			a.Errors = append(a.Errors, what+": "+err.Error())
		}
		return err != nil
	}
	lib, err := Open("")
	if fail("open", err) || fail("init", lib.Init()) {
		return a
	}
	t := NewUMAD(lib)
	defer t.Close()
	c := NewClient(t)
	ctx := context.Background()
	ports, err := lib.Ports()
	if fail("ports", err) || len(ports) == 0 {
		return a
	}
	a.Port = ports[0]
	p := a.Port
	if silent {
		start := time.Now()
		_, err := c.SMInfo(ctx, p, Route{LID: p.SMLID})
		a.SilentTook, a.SilentErr = time.Since(start), fmt.Sprint(err)
		return a
	}
	a.SM, err = c.SMInfo(ctx, p, Route{LID: p.SMLID})
	fail("SMInfo", err)
	a.SM2, err = c.SMInfo(ctx, p, Route{LID: p.SMLID})
	fail("SMInfo again", err)
	a.SMName, err = c.NodeDesc(ctx, p, Route{LID: p.SMLID})
	fail("NodeDescription", err)
	a.SMs, err = c.SMInfoRecords(ctx, p)
	fail("SMInfoRecord", err)
	a.PKeys, err = c.PKeyTable(ctx, p, Route{Path: []uint8{}}, 0, 64)
	fail("P_KeyTable", err)
	a.Path, err = c.PathRecord(ctx, p, p.GID())
	fail("PathRecord", err)
	out := Route{Path: []uint8{uint8(p.Num)}}
	a.Neighbour, err = c.NodeInfo(ctx, p, out)
	fail("neighbour NodeInfo", err)
	a.NeighDesc, err = c.NodeDesc(ctx, p, out)
	fail("neighbour NodeDescription", err)
	a.NeighPort, err = c.PortInfo(ctx, p, out, a.Neighbour.LocalPortNum)
	fail("neighbour PortInfo", err)
	if sw, err := c.PortInfo(ctx, p, out, 0); !fail("neighbour port 0", err) {
		a.Counters, err = c.PortCounters(ctx, p, sw.LID, a.Neighbour.LocalPortNum)
		fail("neighbour PortCounters", err)
	}
	return a
}

// simFabric starts ibsim and opensm in dir under a socket name of this
// test's own; both are stopped when the test ends.
func simFabric(t *testing.T, dir, so string) (env []string, stopSM func()) {
	t.Helper()
	env = append(os.Environ(), "IBSIM_SOCKNAME=madtest"+fmt.Sprint(os.Getpid()))
	start := func(name string, extra []string, args ...string) *exec.Cmd {
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = dir, append(append([]string(nil), env...), extra...)
		log, _ := os.Create(filepath.Join(dir, name+".log"))
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	start("ibsim", nil, "-s", "-n", simNet)
	time.Sleep(300 * time.Millisecond)
	sm := start("opensm", []string{"SIM_HOST=Hca1", "LD_PRELOAD=" + so, "OSM_CACHE_DIR=" + dir}, "-f", filepath.Join(dir, "opensm-log"))
	return env, func() { _ = sm.Process.Kill(); _, _ = sm.Process.Wait() }
}

// askChild runs TestSimChild as Hca2 and returns what it saw.
func askChild(t *testing.T, dir, so string, env []string, silent bool) simAnswers {
	t.Helper()
	out := filepath.Join(dir, fmt.Sprintf("answers-%v.json", silent))
	cmd := exec.Command(os.Args[0], "-test.run=^TestSimChild$", "-test.count=1")
	// libumad2sim.so keeps its fake sysfs in the working directory.
	cmd.Dir = dir
	cmd.Env = append(env, "SIM_HOST=Hca2", "LD_PRELOAD="+so, "MAD_SIM_CHILD="+out)
	if silent {
		cmd.Env = append(cmd.Env, "MAD_SIM_SILENT=1")
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, b)
	}
	var a simAnswers
	b, err := os.ReadFile(out)
	if err == nil {
		err = json.Unmarshal(b, &a)
	}
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestSimulator(t *testing.T) {
	so := ""
	for _, p := range umad2sim {
		if _, err := os.Stat(p); err == nil {
			so = p
		}
	}
	_, errSim := exec.LookPath("ibsim")
	_, errSM := exec.LookPath("opensm")
	if so == "" || errSim != nil || errSM != nil {
		t.Skip("ibsim, opensm or libumad2sim.so not installed (apt-get install ibsim-utils opensm): the simulator test does not run")
	}
	if _, err := os.Stat(simNet); err != nil {
		t.Skip("ibsim's example topology is missing: " + err.Error())
	}
	dir := t.TempDir()
	env, stopSM := simFabric(t, dir, so)
	// libumad2sim.so reads the port (its SM LID too) once, when a client
	// starts: ask again until opensm's sweep has given Hca2 an SM LID.
	var a simAnswers
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		if a = askChild(t, dir, so, env, false); a.Port.SMLID != 0 || time.Now().After(deadline) {
			break
		}
	}
	if !a.Simulated {
		t.Error("Simulated() is false in a child with libumad2sim.so preloaded")
	}
	if Simulated() {
		t.Error("Simulated() is true in the test process, which has no libumad2sim.so")
	}
	if len(a.Errors) > 0 {
		t.Fatalf("asking the simulated fabric:\n%s", strings.Join(a.Errors, "\n"))
	}
	judgeSimAnswers(t, a, env, dir, so)
	stopSM()
	s := askChild(t, dir, so, env, true)
	if !strings.Contains(s.SilentErr, "no answer after 2 tries of 200ms each") || s.SilentTook > 2*time.Second {
		t.Errorf("SMInfo with opensm killed: %q after %s, want no answer within two 200 ms tries", s.SilentErr, s.SilentTook)
	}
}

// judgeSimAnswers compares the child's answers with the topology and, when
// installed, with what infiniband-diags' sminfo says of the same fabric.
func judgeSimAnswers(t *testing.T, a simAnswers, env []string, dir, so string) {
	t.Helper()
	if a.SM.State != SMMaster || a.SM2.ActCount == a.SM.ActCount || a.SMName != "Hca1" {
		t.Errorf("SM: %+v then %+v, %q: want MASTER on Hca1 with ActCount moving", a.SM, a.SM2, a.SMName)
	}
	if len(a.SMs) != 1 || a.SMs[0].LID != a.Port.SMLID || a.SMs[0].SMInfo.GUID != a.SM.GUID {
		t.Errorf("the SA lists SMs %+v: want the one master at LID %d", a.SMs, a.Port.SMLID)
	}
	if len(a.PKeys) == 0 || a.PKeys[0] != 0xffff {
		t.Errorf("P_Key table %v: want the default partition 0xffff first", a.PKeys)
	}
	if a.Path.DLID != a.Port.LID || a.Path.SLID != a.Port.LID || a.Path.DGID != a.Port.GID() {
		t.Errorf("path record %+v: want this port (LID %d) to itself", a.Path, a.Port.LID)
	}
	// Hca2's port 1 is cabled to Switch2's port 1 (net.2sw2path4hca).
	if a.Neighbour.NodeType != NodeSwitch || a.Neighbour.LocalPortNum != 1 || a.NeighDesc != "Switch2" ||
		a.NeighPort.PortState != 4 || a.Counters.PortSelect != 1 {
		t.Errorf("neighbour %+v %q, its port %+v, counters %+v: want Switch2 port 1, Active", a.Neighbour, a.NeighDesc, a.NeighPort, a.Counters)
	}
	if _, err := exec.LookPath("sminfo"); err != nil {
		return
	}
	cmd := exec.Command("sminfo")
	cmd.Dir, cmd.Env = dir, append(env, "SIM_HOST=Hca2", "LD_PRELOAD="+so)
	b, err := cmd.CombinedOutput()
	m := regexp.MustCompile(`sm lid (\d+) sm guid 0x([0-9a-f]+),.*state 3 SMINFO_MASTER`).FindStringSubmatch(string(b))
	if err != nil || m == nil {
		t.Fatalf("sminfo: %v\n%s", err, b)
	}
	if m[1] != fmt.Sprint(a.Port.SMLID) || m[2] != fmt.Sprintf("%x", a.SM.GUID) {
		t.Errorf("sminfo says %q; this package read SM LID %d GUID 0x%x", b, a.Port.SMLID, a.SM.GUID)
	}
}
