package fleettest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"
)

const manifests = repoRoot + "/deploy/kubernetes"

// kustomization mirrors the fields of kustomize's types.Kustomization
// (sigs.k8s.io/kustomize/api/types) that our kustomizations may use.
// kustomize's own module is not imported: it would raise the versions of
// dependencies node-problem-detector is built with in this module.
type kustomization struct {
	metav1.TypeMeta    `json:",inline"`
	Namespace          string   `json:"namespace,omitempty"`
	Resources          []string `json:"resources,omitempty"`
	Components         []string `json:"components,omitempty"`
	ConfigMapGenerator []struct {
		Name      string   `json:"name"`
		Namespace string   `json:"namespace,omitempty"`
		Files     []string `json:"files,omitempty"`
	} `json:"configMapGenerator,omitempty"`
	Images []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
	} `json:"images,omitempty"`
	Patches []struct {
		Path   string `json:"path"`
		Target *struct {
			Group   string `json:"group,omitempty"`
			Version string `json:"version,omitempty"`
			Kind    string `json:"kind,omitempty"`
			Name    string `json:"name,omitempty"`
		} `json:"target,omitempty"`
	} `json:"patches,omitempty"`
}

// nodeReadinessRule mirrors the NodeReadinessRule custom resource of the
// Node Readiness Controller (readiness.node.x-k8s.io/v1alpha1), built on
// k8s.io/api's own selector and taint types.
type nodeReadinessRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		NodeSelector metav1.LabelSelector `json:"nodeSelector"`
		Conditions   []struct {
			Type           corev1.NodeConditionType `json:"type"`
			RequiredStatus corev1.ConditionStatus   `json:"requiredStatus"`
		} `json:"conditions"`
		Taint           corev1.Taint `json:"taint"`
		EnforcementMode string       `json:"enforcementMode"`
	} `json:"spec"`
}

// jsonPatchOp is one RFC 6902 operation, as a kustomize JSON patch file
// holds them.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
	From  string `json:"from,omitempty"`
}

// decodeStrict decodes YAML into v and fails on any field v's type lacks.
func decodeStrict(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	decodeStrictData(t, path, data, v)
}

// decodeStrictData decodes one YAML document into v and fails on any field
// v's type lacks.
func decodeStrictData(t *testing.T, name string, data []byte, v any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(data, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// yamlDocuments splits a YAML stream at its "---" lines into the documents
// that hold more than comments.
func yamlDocuments(data []byte) [][]byte {
	var docs [][]byte
	for _, d := range bytes.Split(append([]byte("\n"), data...), []byte("\n---\n")) {
		for _, line := range bytes.Split(d, []byte("\n")) {
			if l := bytes.TrimSpace(line); len(l) > 0 && l[0] != '#' {
				docs = append(docs, d)
				break
			}
		}
	}
	return docs
}

// Every YAML document under deploy/kubernetes decodes strictly into the
// type of what it is; a document of an unknown kind fails. Only the
// readiness rules share a file (rdma-proven and rdma-fault), and each of
// them is decoded.
func TestManifestsDecodeStrictly(t *testing.T) {
	var files []string
	filepath.WalkDir(manifests, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			files = append(files, p)
		}
		return err
	})
	if len(files) < 7 {
		t.Fatalf("found %d YAML files under %s: %v", len(files), manifests, files)
	}
	var rules []nodeReadinessRule
	for _, p := range files {
		data, _ := os.ReadFile(p)
		docs := yamlDocuments(data)
		if len(docs) == 0 {
			t.Errorf("%s: no document", p)
			continue
		}
		if len(docs) > 1 {
			for i, d := range docs {
				var head struct{ APIVersion, Kind string }
				yaml.Unmarshal(d, &head)
				if head.APIVersion+" "+head.Kind != "readiness.node.x-k8s.io/v1alpha1 NodeReadinessRule" {
					t.Errorf("%s: document %d of %d is %s %s: only the readiness rules share a file", p, i+1, len(docs), head.APIVersion, head.Kind)
					continue
				}
				var r nodeReadinessRule
				decodeStrictData(t, fmt.Sprintf("%s, document %d", p, i+1), d, &r)
				rules = append(rules, r)
			}
			continue
		}
		var head struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal(data, &head); err != nil {
			// Not an object: a JSON patch file is a list of operations.
			var ops []jsonPatchOp
			decodeStrict(t, p, &ops)
			if _, err := jsonpatch.DecodePatch(mustJSON(t, ops)); err != nil || len(ops) == 0 {
				t.Errorf("%s: not a JSON patch: %v", p, err)
			}
			continue
		}
		switch head.APIVersion + " " + head.Kind {
		case "apps/v1 DaemonSet":
			decodeStrict(t, p, &appsv1.DaemonSet{})
		case "kustomize.config.k8s.io/v1beta1 Kustomization", "kustomize.config.k8s.io/v1alpha1 Component":
			decodeStrict(t, p, &kustomization{})
		case "readiness.node.x-k8s.io/v1alpha1 NodeReadinessRule":
			var r nodeReadinessRule
			decodeStrict(t, p, &r)
			rules = append(rules, r)
		default:
			t.Errorf("%s: no typed decoder for %s %s", p, head.APIVersion, head.Kind)
		}
	}
	assertReadinessRules(t, rules)
}

// assertReadinessRules checks the decoded rules as the Node Readiness
// Controller reads them: rdma-proven lifts the registration taint once
// RDMAProblem is False and never puts it back (bootstrap-only); rdma-fault
// holds its own taint while RDMAFault is not False (continuous). The
// controller's webhook refuses two rules on one taint key, and accepts
// only these modes and condition statuses.
func assertReadinessRules(t *testing.T, rules []nodeReadinessRule) {
	t.Helper()
	want := map[string]struct {
		mode string
		cond corev1.NodeConditionType
		key  string
	}{
		"rdma-proven": {"bootstrap-only", "RDMAProblem", "readiness.k8s.io/rdma"},
		"rdma-fault":  {"continuous", "RDMAFault", "readiness.k8s.io/rdma-fault"},
	}
	if len(rules) != len(want) {
		t.Fatalf("%d NodeReadinessRules decoded, want rdma-proven and rdma-fault", len(rules))
	}
	keys := map[string]string{}
	for _, r := range rules {
		w, ok := want[r.Name]
		if !ok {
			t.Errorf("NodeReadinessRule %q: not one of rdma-proven, rdma-fault", r.Name)
			continue
		}
		if other, dup := keys[r.Spec.Taint.Key]; dup {
			t.Errorf("rules %s and %s both manage the taint %s: the webhook refuses the second", other, r.Name, r.Spec.Taint.Key)
		}
		keys[r.Spec.Taint.Key] = r.Name
		if r.Spec.EnforcementMode != w.mode || r.Spec.Taint.Key != w.key || r.Spec.Taint.Effect != corev1.TaintEffectNoSchedule ||
			len(r.Spec.Conditions) != 1 || r.Spec.Conditions[0].Type != w.cond || r.Spec.Conditions[0].RequiredStatus != corev1.ConditionFalse {
			t.Errorf("%s: mode %q, taint %+v, conditions %+v: want %s, %s:NoSchedule, %s required False",
				r.Name, r.Spec.EnforcementMode, r.Spec.Taint, r.Spec.Conditions, w.mode, w.key, w.cond)
		}
		if sel, err := metav1.LabelSelectorAsSelector(&r.Spec.NodeSelector); err != nil || sel.Empty() {
			t.Errorf("%s: nodeSelector %+v selects every node (%v)", r.Name, r.Spec.NodeSelector, err)
		}
	}
}

// The strict decoder refuses a misspelt field, which the API server would
// drop with only a warning.
func TestStrictDecodingRefusesUnknownFields(t *testing.T) {
	data, err := os.ReadFile(manifests + "/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Replace(data, []byte("      hostNetwork: true"), []byte("      hostNetwork: true\n      hostNetwrok: true"), 1)
	if bytes.Equal(bad, data) {
		t.Fatal("daemonset.yaml has no `hostNetwork: true` line to misspell")
	}
	if err := yaml.UnmarshalStrict(bad, &appsv1.DaemonSet{}); err == nil || !strings.Contains(err.Error(), "hostNetwrok") {
		t.Errorf("a misspelt field decoded: %v", err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readDaemonSet(t *testing.T, path string) *appsv1.DaemonSet {
	t.Helper()
	var ds appsv1.DaemonSet
	decodeStrict(t, path, &ds)
	return &ds
}

// strategicMerge applies a strategic merge patch file to obj as kustomize
// does for a patch that is a partial object, and decodes the result
// strictly.
func strategicMerge(t *testing.T, obj *appsv1.DaemonSet, patchPath string) *appsv1.DaemonSet {
	t.Helper()
	patch, err := os.ReadFile(patchPath)
	if err != nil {
		t.Fatal(err)
	}
	pj, err := yaml.YAMLToJSONStrict(patch)
	if err != nil {
		t.Fatalf("%s: %v", patchPath, err)
	}
	merged, err := strategicpatch.StrategicMergePatch(mustJSON(t, obj), pj, appsv1.DaemonSet{})
	if err != nil {
		t.Fatalf("apply %s: %v", patchPath, err)
	}
	var out appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(merged, &out); err != nil {
		t.Fatalf("%s applied: %v", patchPath, err)
	}
	return &out
}

func boolIs(p *bool, want bool) bool { return p != nil && *p == want }

// assertRdmadoctorPod checks the security fields of rdmadoctor's pod.
func assertRdmadoctorPod(t *testing.T, ds *appsv1.DaemonSet) *corev1.Container {
	t.Helper()
	spec := ds.Spec.Template.Spec
	if !spec.HostNetwork {
		t.Error("hostNetwork: the RoCE checks judge the host's netdevs")
	}
	if spec.HostPID || spec.HostIPC {
		t.Error("hostPID/hostIPC: not needed, not wanted")
	}
	if spec.PriorityClassName != "system-node-critical" {
		t.Errorf("priorityClassName %q", spec.PriorityClassName)
	}
	if !slices.ContainsFunc(spec.Tolerations, func(tl corev1.Toleration) bool {
		return tl.Operator == corev1.TolerationOpExists && tl.Key == "" && tl.Effect == ""
	}) {
		t.Errorf("tolerations %+v: must tolerate every taint, its own readiness taint included", spec.Tolerations)
	}
	if !boolIs(spec.AutomountServiceAccountToken, false) {
		t.Error("automountServiceAccountToken: it never talks to the API server")
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want rdmadoctor alone", len(spec.Containers))
	}
	c := &spec.Containers[0]
	sc := c.SecurityContext
	if sc == nil || !boolIs(sc.Privileged, false) || !boolIs(sc.AllowPrivilegeEscalation, false) || !boolIs(sc.ReadOnlyRootFilesystem, true) {
		t.Fatalf("securityContext %+v: want privileged false, allowPrivilegeEscalation false, readOnlyRootFilesystem true", sc)
	}
	// IPC_LOCK for memory registration, SYS_ADMIN for gpu.acs's reads of
	// config space beyond 64 bytes (without it gpu.acs is unknown on every
	// healthy GPU node); nothing else.
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Add, []corev1.Capability{"IPC_LOCK", "SYS_ADMIN"}) ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("capabilities %+v: want add [IPC_LOCK SYS_ADMIN], drop [ALL]", sc.Capabilities)
	}
	// The pod: the runtime's seccomp filter, and nothing else.
	if psc := spec.SecurityContext; psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
		psc.RunAsUser != nil || len(psc.Sysctls) > 0 || psc.FSGroup != nil || len(psc.SupplementalGroups) > 0 {
		t.Errorf("pod securityContext %+v: want seccompProfile RuntimeDefault and nothing else", psc)
	}
	// UID 0 on purpose (Kubernetes grants added capabilities to root only),
	// written out so that no admission default makes it another user.
	if sc.RunAsUser == nil || *sc.RunAsUser != 0 || !boolIs(sc.RunAsNonRoot, false) || sc.SeccompProfile != nil {
		t.Errorf("container securityContext %+v: want runAsUser 0, runAsNonRoot false, the pod's seccomp profile", sc)
	}
	return c
}

// hostMounts maps each hostPath the container mounts to its mount.
func hostMounts(ds *appsv1.DaemonSet, c *corev1.Container) map[string]corev1.VolumeMount {
	host := map[string]string{}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.HostPath != nil {
			host[v.Name] = filepath.Clean(v.HostPath.Path)
		}
	}
	out := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		if p, ok := host[m.Name]; ok {
			out[p] = m
		}
	}
	return out
}

func hostPathType(ds *appsv1.DaemonSet, path string) corev1.HostPathType {
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.HostPath != nil && filepath.Clean(v.HostPath.Path) == path && v.HostPath.Type != nil {
			return *v.HostPath.Type
		}
	}
	return ""
}

func TestDaemonSetSecurity(t *testing.T) {
	ds := readDaemonSet(t, manifests+"/daemonset.yaml")
	c := assertRdmadoctorPod(t, ds)
	mounts := hostMounts(ds, c)
	var paths []string
	for p := range mounts {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	if want := []string{"/dev/infiniband", "/lib/modules", "/var/lib/rdmadoctor"}; !slices.Equal(paths, want) {
		t.Errorf("host paths mounted %v, want exactly %v", paths, want)
	}
	if m := mounts["/lib/modules"]; !m.ReadOnly || m.MountPath != "/lib/modules" {
		t.Errorf("/lib/modules mounted %+v: want read-only at /lib/modules", m)
	}
	if m := mounts["/dev/infiniband"]; m.MountPath != "/dev/infiniband" || hostPathType(ds, "/dev/infiniband") != corev1.HostPathDirectory {
		t.Errorf("/dev/infiniband mounted %+v (type %q): want at /dev/infiniband, type Directory", m, hostPathType(ds, "/dev/infiniband"))
	}
	state := mounts["/var/lib/rdmadoctor"]
	if state.ReadOnly || hostPathType(ds, "/var/lib/rdmadoctor") != corev1.HostPathDirectoryOrCreate {
		t.Errorf("state directory mounted %+v: want writable, type DirectoryOrCreate", state)
	}
	for _, flag := range []string{"--state=", "--output="} {
		i := slices.IndexFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, flag) })
		if i < 0 || filepath.Dir(strings.TrimPrefix(c.Args[i], flag)) != state.MountPath {
			t.Errorf("args %v: want %s… in the state directory %s", c.Args, flag, state.MountPath)
		}
	}
}

// The RDMA shared device plugin overlay, merged as kustomize merges it,
// asks for the plugin's resource and changes nothing else about security.
func TestDevicePluginOverlay(t *testing.T) {
	ds := readDaemonSet(t, manifests+"/daemonset.yaml")
	merged := strategicMerge(t, ds, manifests+"/device-plugin-patch.yaml")
	c := assertRdmadoctorPod(t, merged)
	var rdma []string
	for name, q := range c.Resources.Limits {
		if strings.HasPrefix(string(name), "rdma/") && q.Value() == 1 {
			rdma = append(rdma, string(name))
		}
	}
	if len(rdma) != 1 {
		t.Errorf("limits %v: want one rdma/… device plugin resource of 1", c.Resources.Limits)
	}
	if lim := c.Resources.Limits[corev1.ResourceMemory]; lim.IsZero() {
		t.Error("the overlay lost the memory limit: a list was replaced, not merged")
	}
	if len(merged.Spec.Template.Spec.Volumes) != len(ds.Spec.Template.Spec.Volumes) {
		t.Error("the overlay changed the volumes")
	}
}

// npdUpstream is node-problem-detector's own DaemonSet, from the module
// source of the version go.mod pins.
func npdUpstream(t *testing.T) *appsv1.DaemonSet {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/node-problem-detector").Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Fatalf("go list -m k8s.io/node-problem-detector: %v", err)
	}
	return readDaemonSet(t, filepath.Join(dir, "deployment", "node-problem-detector.yaml"))
}

// jsonPatch applies a JSON patch file (RFC 6902) to obj and decodes the
// result strictly.
func jsonPatch(t *testing.T, obj *appsv1.DaemonSet, patchPath string) *appsv1.DaemonSet {
	t.Helper()
	var ops []jsonPatchOp
	decodeStrict(t, patchPath, &ops)
	p, err := jsonpatch.DecodePatch(mustJSON(t, ops))
	if err != nil {
		t.Fatalf("%s: %v", patchPath, err)
	}
	patched, err := p.Apply(mustJSON(t, obj))
	if err != nil {
		t.Fatalf("apply %s: %v", patchPath, err)
	}
	var out appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(patched, &out); err != nil {
		t.Fatalf("%s applied: %v", patchPath, err)
	}
	return &out
}

// The NPD component's patches, applied to node-problem-detector's own
// DaemonSet as its kustomization says: NPD keeps its monitors and gains
// rdmadoctor's; the plugin, its config and the state are where the monitor
// config looks for them; the installer container holds no privilege.
func TestNPDComponentOnUpstreamDaemonSet(t *testing.T) {
	var k kustomization
	decodeStrict(t, manifests+"/npd/kustomization.yaml", &k)
	up := npdUpstream(t)
	ds := up
	for _, p := range k.Patches {
		if p.Target == nil || p.Target.Kind != "DaemonSet" || p.Target.Name != up.Name {
			t.Fatalf("patch %s targets %+v, not NPD's DaemonSet %s", p.Path, p.Target, up.Name)
		}
		if strings.Contains(p.Path, "args") {
			ds = jsonPatch(t, ds, manifests+"/npd/"+p.Path)
		} else {
			ds = strategicMerge(t, ds, manifests+"/npd/"+p.Path)
		}
	}
	for _, g := range k.ConfigMapGenerator {
		if g.Namespace != up.Namespace {
			t.Errorf("ConfigMap %s in namespace %q, NPD runs in %q: its pods cannot mount it", g.Name, g.Namespace, up.Namespace)
		}
	}

	npd := ds.Spec.Template.Spec.Containers[0]
	if npd.Name != up.Spec.Template.Spec.Containers[0].Name || !slices.Equal(npd.Command[:len(up.Spec.Template.Spec.Containers[0].Command)], up.Spec.Template.Spec.Containers[0].Command) {
		t.Errorf("NPD's command %v lost what it had", npd.Command)
	}
	const flag = "--config.custom-plugin-monitor="
	cfg := ""
	for _, a := range npd.Command {
		if v, ok := strings.CutPrefix(a, flag); ok {
			cfg = v
		}
	}
	m := readMonitor(t)
	mountOf := func(path string) (corev1.VolumeMount, bool) {
		for _, vm := range npd.VolumeMounts {
			if strings.HasPrefix(path, vm.MountPath+"/") {
				return vm, true
			}
		}
		return corev1.VolumeMount{}, false
	}
	vols := map[string]corev1.Volume{}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		vols[v.Name] = v
	}
	if vm, ok := mountOf(cfg); !ok || vols[vm.Name].ConfigMap == nil || vols[vm.Name].ConfigMap.Name != k.ConfigMapGenerator[0].Name ||
		filepath.Base(cfg) != k.ConfigMapGenerator[0].Files[0] {
		t.Errorf("NPD reads its monitor config at %q, which is not the generated ConfigMap's file", cfg)
	}
	stateArg := ""
	for _, a := range m.Rules[0].Args {
		if v, ok := strings.CutPrefix(a, "--state="); ok {
			stateArg = v
		}
	}
	if vm, ok := mountOf(stateArg); !ok || !vm.ReadOnly || vols[vm.Name].HostPath == nil || vols[vm.Name].HostPath.Path != "/var/lib/rdmadoctor" {
		t.Errorf("the plugin reads %s: not on a read-only mount of the host's /var/lib/rdmadoctor", stateArg)
	}
	bin, ok := mountOf(m.Rules[0].Path)
	if !ok || vols[bin.Name].EmptyDir == nil {
		t.Fatalf("the plugin %s is not on the shared emptyDir", m.Rules[0].Path)
	}
	inits := ds.Spec.Template.Spec.InitContainers
	if len(inits) != 1 {
		t.Fatalf("%d init containers, want the installer", len(inits))
	}
	ic := inits[0]
	if n := len(ic.Command); n == 0 || ic.Command[n-1] != m.Rules[0].Path ||
		!slices.ContainsFunc(ic.VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.Name == bin.Name && !vm.ReadOnly }) {
		t.Errorf("the installer %v does not write the plugin to %s", ic.Command, m.Rules[0].Path)
	}
	sc := ic.SecurityContext
	if sc == nil || !boolIs(sc.Privileged, false) || !boolIs(sc.AllowPrivilegeEscalation, false) || !boolIs(sc.ReadOnlyRootFilesystem, true) ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
		t.Errorf("installer securityContext %+v: want no privilege at all", sc)
	}
}
