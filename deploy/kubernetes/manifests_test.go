// Package kubernetes holds the tests of the Kubernetes and
// node-problem-detector manifests shipped beside it.
package kubernetes

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// npdConfig mirrors node-problem-detector's custom plugin monitor config
// (pkg/custompluginmonitor/types): decoding with unknown fields refused
// catches a misspelt key, which NPD would silently ignore.
type npdConfig struct {
	Plugin       string `json:"plugin"`
	PluginConfig struct {
		InvokeInterval    string `json:"invoke_interval"`
		Timeout           string `json:"timeout"`
		MaxOutputLength   *int   `json:"max_output_length"`
		Concurrency       *int   `json:"concurrency"`
		MessageChange     *bool  `json:"enable_message_change_based_condition_update"`
		SkipInitialStatus *bool  `json:"skip_initial_status"`
	} `json:"pluginConfig"`
	Source           string `json:"source"`
	MetricsReporting *bool  `json:"metricsReporting"`
	Conditions       []struct {
		Type    string `json:"type"`
		Reason  string `json:"reason"`
		Message string `json:"message"`
	} `json:"conditions"`
	Rules []struct {
		Type           string   `json:"type"`
		Condition      string   `json:"condition"`
		Reason         string   `json:"reason"`
		Path           string   `json:"path"`
		Args           []string `json:"args"`
		Timeout        string   `json:"timeout"`
		InvokeInterval string   `json:"invoke_interval"`
	} `json:"rules"`
}

func readNPDConfig(t *testing.T) npdConfig {
	t.Helper()
	data, err := os.ReadFile("npd/rdmadoctor-monitor.json")
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c npdConfig
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("npd/rdmadoctor-monitor.json: %v", err)
	}
	return c
}

func duration(t *testing.T, what, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("%s %q: not a positive duration (%v)", what, s, err)
	}
	return d
}

// TestNPDMonitorConfig holds the config to what NPD validates and to what
// the verdict model asks: a permanent rule for RDMAProblem (healthy False,
// problem True, unknown Unknown) and one for RDMAFault, the same plugin run
// with --problem-only (unknown False), no healthy status before the first
// run, message changes written.
func TestNPDMonitorConfig(t *testing.T) {
	c := readNPDConfig(t)
	pc := c.PluginConfig
	if c.Plugin != "custom" || c.Source == "" {
		t.Errorf("plugin %q, source %q: NPD supports only \"custom\" and needs a source", c.Plugin, c.Source)
	}
	global := duration(t, "pluginConfig.timeout", pc.Timeout)
	duration(t, "pluginConfig.invoke_interval", pc.InvokeInterval)
	if pc.MaxOutputLength == nil || *pc.MaxOutputLength != 80 {
		t.Error("max_output_length must be 80: the adapter's line is at most 80 bytes")
	}
	if pc.SkipInitialStatus == nil || !*pc.SkipInitialStatus {
		t.Error("skip_initial_status must be true: without it NPD reports the node healthy before the first run")
	}
	if pc.MessageChange == nil || !*pc.MessageChange {
		t.Error("enable_message_change_based_condition_update must be true")
	}
	conds := []string{"RDMAProblem", "RDMAFault"}
	if len(c.Rules) != len(conds) || len(c.Conditions) != len(conds) {
		t.Fatalf("%d rules and %d conditions, want %d of each: %v", len(c.Rules), len(c.Conditions), len(conds), conds)
	}
	for i, want := range conds {
		r, cond := c.Rules[i], c.Conditions[i]
		if r.Type != "permanent" || r.Condition != want || cond.Type != want || r.Reason == "" || r.Reason == cond.Reason {
			t.Errorf("rule %+v, condition %+v: want a permanent %s rule whose reason differs from the default one", r, cond, want)
		}
		// NPD gives an Unknown condition the default condition's reason: it
		// must not claim health.
		for _, w := range []string{"healthy", "ok", "good", "pass"} {
			if strings.Contains(strings.ToLower(cond.Reason), w) {
				t.Errorf("%s: default reason %q says %q, and NPD shows it on Unknown too", want, cond.Reason, w)
			}
		}
		if r.Timeout != "" && duration(t, "rule timeout", r.Timeout) > global {
			t.Errorf("%s: rule timeout above the global timeout: NPD refuses the config", want)
		}
		if len(r.Args) == 0 || r.Args[0] != "npd" {
			t.Errorf("%s: rule args %q do not run `rdmadoctor npd`", want, r.Args)
		}
	}
	// RDMAFault is RDMAProblem with unknown folded into False: the same
	// plugin, state, age and timeout, and --problem-only, which only it has.
	problem, fault := c.Rules[0], c.Rules[1]
	if slices.Contains(problem.Args, "--problem-only") {
		t.Errorf("RDMAProblem's args %q hold --problem-only: its Unknown would read False and resume an unproven node", problem.Args)
	}
	if want := append(slices.Clone(problem.Args), "--problem-only"); !slices.Equal(fault.Args, want) {
		t.Errorf("RDMAFault's args %q, want RDMAProblem's plus --problem-only: %q", fault.Args, want)
	}
	if fault.Path != problem.Path || fault.Timeout != problem.Timeout || fault.InvokeInterval != problem.InvokeInterval {
		t.Errorf("RDMAFault runs %s (timeout %q, interval %q), RDMAProblem %s (%q, %q): want the same plugin, the same way",
			fault.Path, fault.Timeout, fault.InvokeInterval, problem.Path, problem.Timeout, problem.InvokeInterval)
	}
}

// yamlDocs parses every YAML document of a file into generic maps.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var docs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return docs
			}
			t.Fatalf("%s: %v", path, err)
		}
		if m != nil {
			docs = append(docs, m)
		}
	}
}

// dig walks maps by key and lists by index ("0").
func dig(v any, keys ...string) any {
	for _, k := range keys {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i := -1
			for n := range x {
				if k == string(rune('0'+n)) {
					i = n
				}
			}
			if i < 0 {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func strs(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, e := range l {
		s, _ := e.(string)
		out = append(out, s)
	}
	return out
}

// flagValue returns --name=VALUE from args.
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

func TestDaemonSet(t *testing.T) {
	docs := yamlDocs(t, "daemonset.yaml")
	if len(docs) != 1 || docs[0]["kind"] != "DaemonSet" {
		t.Fatalf("daemonset.yaml: want one DaemonSet, got %d documents", len(docs))
	}
	spec := dig(docs[0], "spec", "template", "spec")
	if dig(spec, "hostNetwork") != true || dig(spec, "priorityClassName") != "system-node-critical" {
		t.Error("want hostNetwork: true and priorityClassName: system-node-critical")
	}
	if dig(spec, "tolerations", "0", "operator") != "Exists" {
		t.Error("the DaemonSet must tolerate every taint: it lifts the one that keeps the node out of work")
	}
	ctr := dig(spec, "containers", "0")
	sc := dig(ctr, "securityContext")
	if dig(sc, "privileged") != false || dig(sc, "readOnlyRootFilesystem") != true || dig(sc, "allowPrivilegeEscalation") != false {
		t.Errorf("securityContext %v: want not privileged, read-only root, no escalation", sc)
	}
	// IPC_LOCK for the probes, SYS_ADMIN for gpu.acs (deploy/privileges_test.go
	// holds them to the checks' declared needs); nothing else.
	if add := strs(dig(sc, "capabilities", "add")); !slices.Equal(add, []string{"IPC_LOCK", "SYS_ADMIN"}) {
		t.Errorf("capabilities add %v, want only IPC_LOCK and SYS_ADMIN", add)
	}
	if drop := strs(dig(sc, "capabilities", "drop")); !slices.Equal(drop, []string{"ALL"}) {
		t.Errorf("capabilities drop %v, want ALL", drop)
	}
	// A root daemon on every node runs under the runtime's seccomp filter,
	// and its UID 0 is written out, with the reasons beside it.
	if typ := dig(spec, "securityContext", "seccompProfile", "type"); typ != "RuntimeDefault" {
		t.Errorf("pod seccompProfile type %v, want RuntimeDefault", typ)
	}
	if dig(sc, "runAsUser") != 0 || dig(sc, "runAsNonRoot") != false {
		t.Errorf("securityContext %v: want runAsUser: 0 and runAsNonRoot: false, stated", sc)
	}
	if data, err := os.ReadFile("daemonset.yaml"); err != nil || !bytes.Contains(data, []byte("# UID 0, on purpose")) {
		t.Error("daemonset.yaml does not say why it runs as UID 0")
	}
	args := strs(dig(ctr, "args"))
	if flagValue(args, "repeat") == "" || flagValue(args, "state") != "/var/lib/rdmadoctor/state.json" {
		t.Errorf("args %v: want --repeat and --state=/var/lib/rdmadoctor/state.json", args)
	}
	hostPaths := map[string]bool{}
	for _, v := range asList(dig(spec, "volumes")) {
		if p, ok := dig(v, "hostPath", "path").(string); ok {
			hostPaths[p] = true
		}
	}
	for _, p := range []string{"/dev/infiniband", "/lib/modules", "/var/lib/rdmadoctor"} {
		if !hostPaths[p] {
			t.Errorf("no hostPath volume for %s", p)
		}
	}
	for _, m := range asList(dig(ctr, "volumeMounts")) {
		if dig(m, "mountPath") == "/lib/modules" && dig(m, "readOnly") != true {
			t.Error("/lib/modules must be mounted read-only")
		}
	}
}

// The plugin reads the state the DaemonSet writes, from the path the NPD
// patch mounts and installs it at, and calls it stale only after more than
// two missed runs.
func TestNPDPluginMatchesDaemonSet(t *testing.T) {
	c := readNPDConfig(t)
	// RDMAProblem's rule; TestNPDMonitorConfig holds RDMAFault's to the
	// same path and args (and --problem-only).
	rule := c.Rules[0]
	args := strs(dig(yamlDocs(t, "daemonset.yaml")[0], "spec", "template", "spec", "containers", "0", "args"))
	if got, want := flagValue(rule.Args, "state"), flagValue(args, "state"); got != want {
		t.Errorf("NPD rule reads --state=%s, the DaemonSet writes %s", got, want)
	}
	repeat := duration(t, "--repeat", flagValue(args, "repeat"))
	if maxAge := duration(t, "--max-age", flagValue(rule.Args, "max-age")); maxAge < 2*repeat+repeat/5 {
		t.Errorf("--max-age %v is less than two --repeat %v periods with jitter", maxAge, repeat)
	}
	patch := yamlDocs(t, "npd/npd-daemonset-patch.yaml")[0]
	spec := dig(patch, "spec", "template", "spec")
	dest := strs(dig(spec, "initContainers", "0", "command"))
	if len(dest) == 0 || dest[len(dest)-1] != rule.Path {
		t.Errorf("the init container installs %v, the rule runs %s", dest, rule.Path)
	}
	mounts := map[string]bool{}
	for _, m := range asList(dig(spec, "containers", "0", "volumeMounts")) {
		p, _ := dig(m, "mountPath").(string)
		mounts[p] = true
	}
	if !mounts[filepath.Dir(rule.Path)] || !mounts[filepath.Dir(flagValue(rule.Args, "state"))] {
		t.Errorf("NPD's container mounts %v: not the plugin's directory or the state's", mounts)
	}
	var ops []map[string]any
	data, _ := os.ReadFile("npd/npd-args-patch.yaml")
	if err := yaml.Unmarshal(data, &ops); err != nil || len(ops) != 1 {
		t.Fatalf("npd-args-patch.yaml: %v", err)
	}
	v, _ := ops[0]["value"].(string)
	cfg, _ := strings.CutPrefix(v, "--config.custom-plugin-monitor=")
	var cfgMounted bool
	for m := range mounts {
		cfgMounted = cfgMounted || filepath.Dir(cfg) == m
	}
	if !cfgMounted || filepath.Base(cfg) != "rdmadoctor-monitor.json" {
		t.Errorf("NPD is told to read %q, which no mounted volume holds", cfg)
	}
}

// TestReadinessRule holds the two NodeReadinessRules to the verdict model:
// rdma-proven (bootstrap-only, on RDMAProblem) keeps a new node out of work
// until it is first healthy and never comes back; rdma-fault (continuous,
// on RDMAFault, which --problem-only keeps False for unknown) is on only
// while a problem is seen. Absent conditions keep both taints (no
// defaultStatus), and the taint keys differ: the controller's webhook
// refuses two rules managing one key.
func TestReadinessRule(t *testing.T) {
	docs := yamlDocs(t, "npd/rdma-readiness-rule.yaml")
	want := []struct{ name, mode, cond, key, value string }{
		{"rdma-proven", "bootstrap-only", "RDMAProblem", "readiness.k8s.io/rdma", "unproven"},
		{"rdma-fault", "continuous", "RDMAFault", "readiness.k8s.io/rdma-fault", "problem"},
	}
	if len(docs) != len(want) {
		t.Fatalf("%d documents, want the rules %v", len(docs), want)
	}
	var selector any
	for i, w := range want {
		doc := docs[i]
		if doc["kind"] != "NodeReadinessRule" || doc["apiVersion"] != "readiness.node.x-k8s.io/v1alpha1" {
			t.Fatalf("document %d: kind %v %v", i, doc["apiVersion"], doc["kind"])
		}
		if name := dig(doc, "metadata", "name"); name != w.name {
			t.Errorf("document %d is named %v, want %s", i, name, w.name)
		}
		spec := dig(doc, "spec")
		if conds := asList(dig(spec, "conditions")); len(conds) != 1 {
			t.Errorf("%s: %d conditions, want %s alone", w.name, len(conds), w.cond)
		}
		cond := dig(spec, "conditions", "0")
		if dig(cond, "type") != w.cond || dig(cond, "requiredStatus") != "False" || dig(cond, "defaultStatus") != nil {
			t.Errorf("%s: condition %v: want %s required False, no defaultStatus (absent must keep the taint)", w.name, cond, w.cond)
		}
		if dig(spec, "taint", "key") != w.key || dig(spec, "taint", "value") != w.value || dig(spec, "taint", "effect") != "NoSchedule" {
			t.Errorf("%s: taint %v, want %s=%s:NoSchedule", w.name, dig(spec, "taint"), w.key, w.value)
		}
		if dig(spec, "enforcementMode") != w.mode {
			t.Errorf("%s: enforcementMode %v, want %s", w.name, dig(spec, "enforcementMode"), w.mode)
		}
		if dig(spec, "dryRun") != nil {
			t.Errorf("%s: dryRun set: the rule would taint nothing", w.name)
		}
		sel := dig(spec, "nodeSelector")
		if sel == nil || (i > 0 && !reflect.DeepEqual(sel, selector)) {
			t.Errorf("%s: nodeSelector %v, want the same nodes as %s (%v)", w.name, sel, want[0].name, selector)
		}
		selector = sel
	}
	// The monitor publishes the conditions the rules read.
	c := readNPDConfig(t)
	for i, w := range want {
		if i < len(c.Conditions) && c.Conditions[i].Type != w.cond {
			t.Errorf("the monitor's condition %d is %s, the rule %s reads %s", i, c.Conditions[i].Type, w.name, w.cond)
		}
	}
}

// Every file a kustomization names exists and parses.
func TestKustomizationsNameTheirFiles(t *testing.T) {
	for _, k := range []string{"kustomization.yaml", "npd/kustomization.yaml"} {
		doc := yamlDocs(t, k)[0]
		var files []string
		files = append(files, strs(doc["resources"])...)
		for _, p := range asList(dig(doc, "patches")) {
			files = append(files, dig(p, "path").(string))
		}
		for _, g := range asList(doc["configMapGenerator"]) {
			files = append(files, strs(dig(g, "files"))...)
		}
		for _, f := range files {
			if _, err := os.Stat(filepath.Join(filepath.Dir(k), f)); err != nil {
				t.Errorf("%s names %s: %v", k, f, err)
			}
		}
	}
}

// The image recipe builds the portable binary and installs the library and
// providers it opens at run time.
func TestImageRecipe(t *testing.T) {
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CGO_ENABLED=0", "libibverbs1", "ibverbs-providers", "/usr/local/bin/rdmadoctor"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	// The NPD patch copies the binary from where the image puts it.
	cp := strs(dig(yamlDocs(t, "npd/npd-daemonset-patch.yaml")[0], "spec", "template", "spec", "initContainers", "0", "command"))
	if !slices.Contains(cp, "/usr/local/bin/rdmadoctor") {
		t.Errorf("the init container copies %v, not the image's /usr/local/bin/rdmadoctor", cp)
	}
}

func asList(v any) []any { l, _ := v.([]any); return l }

// With kubectl on PATH, kustomize builds the DaemonSet and the NPD
// component over a node-problem-detector DaemonSet shaped like upstream's.
func TestKustomizeBuild(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not on PATH: kustomize builds not run")
	}
	if out, err := exec.Command(kubectl, "kustomize", ".").CombinedOutput(); err != nil {
		t.Fatalf("kubectl kustomize deploy/kubernetes: %v\n%s", err, out)
	}
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "base"), 0o755)
	os.WriteFile(filepath.Join(dir, "base", "kustomization.yaml"), []byte("resources:\n  - npd.yaml\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "base", "npd.yaml"), []byte(upstreamNPD), 0o644)
	os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte("resources:\n  - base\ncomponents:\n  - npd\n"), 0o644)
	if err := os.CopyFS(filepath.Join(dir, "npd"), os.DirFS("npd")); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, "kustomize", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("kustomize with the npd component: %v\n%s", err, out)
	}
	for _, want := range []string{"--config.custom-plugin-monitor=/etc/rdmadoctor-npd/rdmadoctor-monitor.json",
		"--config.system-log-monitor=/config/kernel-monitor.json", "rdmadoctor-install", "path: /var/lib/rdmadoctor"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("built NPD DaemonSet lacks %q:\n%s", want, out)
		}
	}
}

// upstreamNPD is the shape of node-problem-detector's own DaemonSet
// (deployment/node-problem-detector.yaml), trimmed to what the patch meets.
const upstreamNPD = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: node-problem-detector
  namespace: kube-system
spec:
  selector:
    matchLabels:
      app: node-problem-detector
  template:
    metadata:
      labels:
        app: node-problem-detector
    spec:
      containers:
      - name: node-problem-detector
        command:
        - /node-problem-detector
        - --logtostderr
        - --config.system-log-monitor=/config/kernel-monitor.json
        image: registry.k8s.io/node-problem-detector/node-problem-detector:v0.8.19
        volumeMounts:
        - name: config
          mountPath: /config
          readOnly: true
      volumes:
      - name: config
        configMap:
          name: node-problem-detector-config
`
