package fleettest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"
)

// apiRequest is one request the fake API server received.
type apiRequest struct {
	At     time.Time
	Method string
	Path   string
	Type   string // Content-Type
	Body   []byte
}

func (r apiRequest) String() string { return r.Method + " " + r.Path }

// statusPatch is what a node status PATCH may carry: NPD's k8s exporter
// sends the conditions it owns and nothing else. Decoding it strictly
// catches any other field.
type statusPatch struct {
	Status struct {
		Conditions []corev1.NodeCondition `json:"conditions"`
	} `json:"status"`
}

// fakeAPIServer speaks the part of the Kubernetes API that
// node-problem-detector's k8s exporter uses — GET a node, PATCH its status
// (a strategic merge, applied with apimachinery's own code), POST and
// PATCH events — over TLS with a bearer token, and records every request.
// Anything else is answered 404 and kept as unexpected, so the test learns
// what NPD really calls.
type fakeAPIServer struct {
	t     *testing.T
	srv   *httptest.Server
	token string
	node  string

	mu         sync.Mutex
	current    []byte // the node object, JSON
	requests   []apiRequest
	patches    []statusPatch
	events     []corev1.Event
	unexpected []string
}

var coreCodecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(s)
}()

func newFakeAPIServer(t *testing.T, node string) *fakeAPIServer {
	t.Helper()
	initial := corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: node, UID: "3f0c9a51-7d2e-4b6a-9c1d-5e8f00000001", ResourceVersion: "1"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			// The kubelet's own condition: NPD's patches must leave it alone.
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "kubelet is posting ready status",
		}}},
	}
	cur, err := json.Marshal(initial)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeAPIServer{t: t, token: "rdmadoctor-fleettest-token", node: node, current: cur}
	f.srv = httptest.NewTLSServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPIServer) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := apiRequest{At: time.Now(), Method: r.Method, Path: r.URL.Path, Type: r.Header.Get("Content-Type"), Body: body}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, req)
	if r.Header.Get("Authorization") != "Bearer "+f.token {
		f.unexpected = append(f.unexpected, req.String()+": without the kubeconfig's token")
		f.status(w, http.StatusUnauthorized, "Unauthorized")
		return
	}
	nodePath := "/api/v1/nodes/" + f.node
	switch {
	case r.Method == http.MethodGet && r.URL.Path == nodePath:
		f.reply(w, http.StatusOK, f.current)
	case r.Method == http.MethodPatch && r.URL.Path == nodePath+"/status":
		f.patchStatus(w, req)
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/api/v1/") && strings.HasSuffix(r.URL.Path, "/events"):
		f.postEvent(w, req)
	case r.Method == http.MethodPatch && strings.Contains(r.URL.Path, "/events/"):
		// The event recorder patches a repeated event's count.
		f.reply(w, http.StatusOK, []byte(`{"kind":"Event","apiVersion":"v1","metadata":{"name":"patched"}}`))
	default:
		f.unexpected = append(f.unexpected, req.String())
		f.status(w, http.StatusNotFound, "the fake API server does not serve "+req.String())
	}
}

func (f *fakeAPIServer) patchStatus(w http.ResponseWriter, req apiRequest) {
	if req.Type != "application/strategic-merge-patch+json" {
		f.unexpected = append(f.unexpected, fmt.Sprintf("%s: Content-Type %q", req, req.Type))
	}
	var p statusPatch
	if err := yaml.UnmarshalStrict(req.Body, &p); err != nil {
		f.unexpected = append(f.unexpected, fmt.Sprintf("%s: %v: %s", req, err, req.Body))
		f.status(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	merged, err := strategicpatch.StrategicMergePatch(f.current, req.Body, corev1.Node{})
	if err != nil {
		f.unexpected = append(f.unexpected, fmt.Sprintf("%s: %v", req, err))
		f.status(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	f.patches = append(f.patches, p)
	f.current = merged
	f.reply(w, http.StatusOK, merged)
}

// postEvent decodes an event as the API server would: client-go sends
// protobuf when NPD asks for it (it does), JSON otherwise.
func (f *fakeAPIServer) postEvent(w http.ResponseWriter, req apiRequest) {
	obj, _, err := coreCodecs.UniversalDeserializer().Decode(req.Body, nil, nil)
	ev, ok := obj.(*corev1.Event)
	if err != nil || !ok {
		f.unexpected = append(f.unexpected, fmt.Sprintf("%s: not an Event (%T, %v)", req, obj, err))
		f.status(w, http.StatusBadRequest, "not an Event")
		return
	}
	f.events = append(f.events, *ev)
	ev.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Event"}
	out, _ := json.Marshal(ev)
	f.reply(w, http.StatusCreated, out)
}

func (f *fakeAPIServer) reply(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(body)
}

func (f *fakeAPIServer) status(w http.ResponseWriter, code int, msg string) {
	st := metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure,
		Message: msg, Code: int32(code)}
	out, _ := json.Marshal(st)
	f.reply(w, code, out)
}

// writeKubeconfig writes a kubeconfig that trusts the server's certificate
// and authenticates with its token, as a real cluster's would.
func (f *fakeAPIServer) writeKubeconfig(t *testing.T, dir string) string {
	t.Helper()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw})
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: npd
  user:
    token: %s
contexts:
- name: fake
  context:
    cluster: fake
    user: npd
current-context: fake
`, f.srv.URL, base64.StdEncoding.EncodeToString(ca), f.token)
	p := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// condition is the node's current condition of type typ, if any.
func (f *fakeAPIServer) condition(typ corev1.NodeConditionType) (corev1.NodeCondition, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n corev1.Node
	if err := json.Unmarshal(f.current, &n); err != nil {
		f.t.Errorf("the stored node does not decode: %v", err)
		return corev1.NodeCondition{}, false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == typ {
			return c, true
		}
	}
	return corev1.NodeCondition{}, false
}

// snapshot copies what was recorded so far.
func (f *fakeAPIServer) snapshot() (reqs []apiRequest, patches []statusPatch, events []corev1.Event, unexpected []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]apiRequest(nil), f.requests...), append([]statusPatch(nil), f.patches...),
		append([]corev1.Event(nil), f.events...), append([]string(nil), f.unexpected...)
}

// summary counts the requests by method and path, for the log.
func summary(reqs []apiRequest) string {
	counts := map[string]int{}
	var order []string
	for _, r := range reqs {
		k := r.String()
		if counts[k] == 0 {
			order = append(order, k)
		}
		counts[k]++
	}
	var b bytes.Buffer
	for _, k := range order {
		fmt.Fprintf(&b, "%s ×%d; ", k, counts[k])
	}
	return strings.TrimSuffix(b.String(), "; ")
}
