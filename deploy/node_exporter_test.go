package deploy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// buildRdmadoctor builds the real binary as CI ships it (CGO_ENABLED=0).
func buildRdmadoctor(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "rdmadoctor")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/rdmadoctor")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/rdmadoctor: %v\n%s", err, out)
	}
	return bin
}

// startNodeExporter runs Debian's node_exporter on a free loopback port with
// the textfile collector alone, reading dir; it returns the metrics URL once
// the exporter answers. The exporter is stopped when the test ends.
func startNodeExporter(t *testing.T, dir string) string {
	t.Helper()
	exe := needTool(t, "prometheus-node-exporter", "prometheus-node-exporter")
	// A port the kernel just gave out and took back is free unless another
	// program grabs it in between: retry a few times rather than flake.
	for attempt := 0; attempt < 5; attempt++ {
		if url := tryNodeExporter(t, exe, dir); url != "" {
			return url
		}
	}
	t.Fatal("node_exporter failed to start on five free ports")
	return ""
}

// tryNodeExporter starts node_exporter on one free port; "" if it exited
// (the port was taken meanwhile).
func tryNodeExporter(t *testing.T, exe, dir string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	log := &strings.Builder{}
	cmd := exec.Command(exe, "--collector.disable-defaults", "--collector.textfile",
		"--collector.textfile.directory="+dir, "--web.listen-address="+addr, "--web.disable-exporter-metrics")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	url := "http://" + addr + "/metrics"
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case err := <-exited:
			t.Logf("node_exporter on %s exited: %v\n%s", addr, err, log)
			return ""
		default:
		}
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			t.Cleanup(func() { cmd.Process.Kill(); <-exited })
			return url
		}
	}
	cmd.Process.Kill()
	<-exited
	t.Fatalf("node_exporter did not answer on %s within 10 s:\n%s", addr, log)
	return ""
}

// scrape is one scrape's samples: series (name and labels) → the values seen.
type scrape struct {
	text    string
	samples map[string][]string
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?) (\S+)$`)

func getScrape(client *http.Client, url string) (*scrape, error) {
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %s:\n%s", resp.Status, body)
	}
	s := &scrape{text: string(body), samples: map[string][]string{}}
	sc := bufio.NewScanner(strings.NewReader(s.text))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("unparsable line %q", line)
		}
		s.samples[m[1]] = append(s.samples[m[1]], m[2])
	}
	return s, nil
}

// rdmadoctorSeries is the set of rdmadoctor_ series in s that every run
// writes; rdmadoctor_finding's come and go with the findings (judge).
func (s *scrape) rdmadoctorSeries() map[string]bool {
	set := map[string]bool{}
	for k := range s.samples {
		if strings.HasPrefix(k, "rdmadoctor_") && !strings.HasPrefix(k, "rdmadoctor_finding{") {
			set[k] = true
		}
	}
	return set
}

// judge says what is wrong with one scrape: a textfile error, a series
// missing, extra or repeated (a partial file, or two files' halves), a
// check with other than one status set, or an exit code that disagrees with
// port.state (the two fixtures' lines mixed). It returns the exit code seen.
func (s *scrape) judge(want map[string]bool) (string, error) {
	if v := s.samples["node_textfile_scrape_error"]; len(v) != 1 || v[0] != "0" {
		return "", fmt.Errorf("node_textfile_scrape_error = %v", v)
	}
	got := s.rdmadoctorSeries()
	for k := range want {
		if !got[k] {
			return "", fmt.Errorf("series %s missing", k)
		}
	}
	ones := map[string]int{}
	for k := range got {
		if !want[k] {
			return "", fmt.Errorf("unexpected series %s", k)
		}
		if v := s.samples[k]; len(v) != 1 {
			return "", fmt.Errorf("series %s has %d values %v, want exactly one", k, len(v), v)
		}
		if strings.HasPrefix(k, "rdmadoctor_check_status{") && s.samples[k][0] == "1" {
			ones[regexp.MustCompile(`check="[^"]*"`).FindString(k)]++
		}
	}
	for c, n := range ones {
		if n != 1 {
			return "", fmt.Errorf("%s has %d statuses set", c, n)
		}
	}
	exit := ""
	portFail := false
	var verdicts []string
	for k, v := range s.samples {
		if strings.HasPrefix(k, "rdmadoctor_exit_code{") {
			exit = v[0]
		}
		if strings.Contains(k, `check="port.state"`) && strings.Contains(k, `status="fail"`) {
			portFail = v[0] == "1"
		}
		if strings.HasPrefix(k, "rdmadoctor_verdict{") && v[0] == "1" {
			verdicts = append(verdicts, regexp.MustCompile(`verdict="([^"]*)"`).FindStringSubmatch(k)[1])
		}
	}
	if (exit == "19") != portFail {
		return "", fmt.Errorf("exit code %s with port.state fail = %v: two files mixed", exit, portFail)
	}
	// The port that is down is named by its finding, and only then.
	var findings []string
	for k := range s.samples {
		if strings.HasPrefix(k, "rdmadoctor_finding{") {
			findings = append(findings, k)
		}
	}
	const downPort = `rdmadoctor_finding{check="port.state",finding="port.state/admin-down",host="cx5-node01",status="fail",unit="mlx5_1/1"}`
	if want := map[string]int{"0": 0, "19": 1}[exit]; len(findings) != want || want == 1 && findings[0] != downPort {
		return "", fmt.Errorf("finding series %v with exit code %s, want %d (%s)", findings, exit, want, downPort)
	}
	// The fixtures are healthy (exit 0) or have a port down (exit 19): the
	// verdict set must hold exactly the one that goes with the exit code.
	if want := map[string]string{"0": "healthy", "19": "problem"}[exit]; len(verdicts) != 1 || verdicts[0] != want {
		return "", fmt.Errorf("verdicts set to 1: %v with exit code %s, want [%s]", verdicts, exit, want)
	}
	return exit, nil
}

// TestNodeExporterTextfile: Debian's node_exporter scrapes the textfile on
// loopback while the real binary rewrites it 200 times, alternating a
// healthy host and one whose port is down, its state file beside it. No
// scrape may see an error, a partial file or two files mixed; promtool lints
// what was scraped.
func TestNodeExporterTextfile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node_exporter and the binary 200 times")
	}
	promtool := needTool(t, "promtool", "prometheus")
	bin := buildRdmadoctor(t)
	dir := t.TempDir()
	prom := filepath.Join(dir, "rdmadoctor.prom")
	hosts := []string{"cx5-roce-healthy", "port-down"}
	write := func(i int) error {
		// The state, its lock and the temporary files share the directory,
		// as in the DaemonSet's /var/lib/rdmadoctor: node_exporter must
		// read none of them.
		cmd := exec.Command(bin, "--root", filepath.Join("..", "testdata", "hosts", hosts[i%2]),
			"--level", "1", "--format", "prometheus", "--output", prom, "--state", filepath.Join(dir, "state.json"))
		out, err := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != 0 && code != 19 || len(out) > 0 {
			return fmt.Errorf("rewrite %d (%s): exit %d (%v), output %q", i, hosts[i%2], code, err, out)
		}
		return nil
	}
	if err := write(0); err != nil {
		t.Fatal(err)
	}
	url := startNodeExporter(t, dir)
	client := &http.Client{Timeout: 10 * time.Second}
	first, err := getScrape(client, url)
	if err != nil {
		t.Fatal(err)
	}
	want := first.rdmadoctorSeries()
	if len(want) < 4 {
		t.Fatalf("the first scrape holds %d rdmadoctor series:\n%s", len(want), first.text)
	}
	if _, err := first.judge(want); err != nil {
		t.Fatalf("first scrape: %v\n%s", err, first.text)
	}

	const rewrites = 200
	ctx, stop := context.WithCancel(context.Background())
	var (
		wg       sync.WaitGroup
		scrapes  int
		exits    = map[string]int{}
		lastText string
		bad      error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil && bad == nil {
			s, err := getScrape(client, url)
			if err == nil {
				var exit string
				exit, err = s.judge(want)
				exits[exit]++
				lastText = s.text
			}
			if err != nil {
				bad = fmt.Errorf("scrape %d: %v", scrapes+1, err)
				if s != nil {
					bad = fmt.Errorf("%v\n%s", bad, s.text)
				}
			}
			scrapes++
		}
	}()
	start := time.Now()
	for i := 1; i <= rewrites; i++ {
		if err := write(i); err != nil {
			stop()
			wg.Wait()
			t.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	stop()
	wg.Wait()
	if bad != nil {
		t.Fatal(bad)
	}
	t.Logf("%d rewrites in %v, %d scrapes during them; exit codes seen: %v", rewrites, elapsed.Round(time.Millisecond), scrapes, exits)
	if exits["0"] == 0 || exits["19"] == 0 {
		t.Errorf("the scrapes saw exit codes %v: the rewrites were not observed (want both 0 and 19)", exits)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*tmp*")); len(left) > 0 {
		t.Errorf("temporary files left in the textfile directory: %v", left)
	}
	lint := exec.Command(promtool, "check", "metrics")
	lint.Stdin = strings.NewReader(lastText)
	if out, err := lint.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("promtool check metrics on the scraped output: %v\n%s", err, out)
	}
}

// TestNodeExporterHostileHostname: a host name with a quote, a backslash,
// a newline, an escape sequence and bytes that are not UTF-8 reaches the
// textfile as a label value; node_exporter must still read the file whole.
func TestNodeExporterHostileHostname(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node_exporter")
	}
	bin := buildRdmadoctor(t)
	root := filepath.Join(t.TempDir(), "host")
	if out, err := exec.Command("cp", "-a", filepath.Join("..", "testdata", "hosts", "port-down"), root).CombinedOutput(); err != nil {
		t.Fatalf("copy the fixture: %v\n%s", err, out)
	}
	// The facts file names the host; without it the host's own file does.
	facts := filepath.Join(root, "rdmadoctor.facts.json")
	data, err := os.ReadFile(facts)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	delete(doc, "hostname")
	data, _ = json.Marshal(doc)
	os.WriteFile(facts, data, 0o644)
	hostile := "node\"7\\a\x1b[31m\xff\xfeé\tend"
	os.WriteFile(filepath.Join(root, "proc", "sys", "kernel", "hostname"), []byte(hostile+"\n"), 0o644)

	dir := t.TempDir()
	cmd := exec.Command(bin, "--root", root, "--level", "1", "--format", "prometheus", "--output", filepath.Join(dir, "rdmadoctor.prom"))
	if out, err := cmd.CombinedOutput(); cmd.ProcessState.ExitCode() != 19 {
		t.Fatalf("rdmadoctor: %v\n%s", err, out)
	}
	s, err := getScrape(&http.Client{Timeout: 10 * time.Second}, startNodeExporter(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	if v := s.samples["node_textfile_scrape_error"]; len(v) != 1 || v[0] != "0" {
		t.Fatalf("node_textfile_scrape_error = %v: node_exporter refused the textfile\n%s", v, s.text)
	}
	var exit []string
	for k, v := range s.samples {
		if strings.HasPrefix(k, "rdmadoctor_exit_code{") {
			exit = append(exit, k+" "+v[0])
		}
	}
	if len(exit) != 1 || !strings.HasSuffix(exit[0], " 19") || !strings.Contains(exit[0], `host="node\"7\\a`) {
		t.Errorf("rdmadoctor_exit_code series %q, want one, 19, with the host name escaped", exit)
	}
	var problem []string
	for k, v := range s.samples {
		if strings.HasPrefix(k, "rdmadoctor_verdict{") && strings.Contains(k, `verdict="problem"`) {
			problem = append(problem, k+" "+v[0])
		}
	}
	if len(problem) != 1 || !strings.HasSuffix(problem[0], " 1") || !strings.Contains(problem[0], `host="node\"7\\a`) {
		t.Errorf("rdmadoctor_verdict{verdict=\"problem\"} series %q, want one, 1, with the host name escaped", problem)
	}
}
