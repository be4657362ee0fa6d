// Package deploy holds the deployment files (systemd units, Kubernetes
// manifests, the release script) and, in this module of its own so that
// the product's go.mod stays free of k8s.io, the test that validates the
// Kubernetes manifests without a cluster.
package deploy

import (
	"bufio"
	"bytes"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/phalanxload/phalanx/internal/allow"
	"github.com/phalanxload/phalanx/internal/plan"
)

// manifests are the objects of every YAML file under kubernetes/, by kind.
type manifests struct {
	deployments  []*appsv1.Deployment
	statefulSets []*appsv1.StatefulSet
	services     []*corev1.Service
	configMaps   []*corev1.ConfigMap
	jobs         []*batchv1.Job
}

// decodeAll decodes every document of every kubernetes/**/*.yaml file
// strictly, with the API types of k8s.io/api: an unknown or duplicate
// field, a value of the wrong type or an unregistered kind fails, naming
// the file and the document.
func decodeAll(t *testing.T) manifests {
	t.Helper()
	decoder := strictDecoder(t)
	var files []string
	err := filepath.WalkDir("kubernetes", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") {
			files = append(files, p)
		}
		return err
	})
	if err != nil || len(files) == 0 {
		t.Fatalf("kubernetes/*.yaml: %v, %v", files, err)
	}
	var m manifests
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
		for doc := 1; ; doc++ {
			raw, err := r.Read()
			if err != nil {
				break // io.EOF
			}
			if len(bytes.TrimSpace(stripComments(raw))) == 0 {
				continue
			}
			obj, gvk, err := decoder.Decode(raw, nil, nil)
			if err != nil {
				t.Errorf("%s, document %d: %v", file, doc, err)
				continue
			}
			switch o := obj.(type) {
			case *appsv1.Deployment:
				m.deployments = append(m.deployments, o)
			case *appsv1.StatefulSet:
				m.statefulSets = append(m.statefulSets, o)
			case *corev1.Service:
				m.services = append(m.services, o)
			case *corev1.ConfigMap:
				m.configMaps = append(m.configMaps, o)
			case *batchv1.Job:
				m.jobs = append(m.jobs, o)
			default:
				t.Errorf("%s, document %d: kind %v, which this test does not check", file, doc, gvk)
			}
		}
	}
	return m
}

// strictDecoder decodes the kinds the manifests use, strictly.
func strictDecoder(t *testing.T) runtime.Decoder {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{appsv1.AddToScheme, corev1.AddToScheme, batchv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}

// TestStrictDecoding: the decoder TestManifests uses refuses a misspelt
// field, a duplicate field, a value of the wrong type and an unknown kind,
// so that a manifest it accepts has none of them.
func TestStrictDecoding(t *testing.T) {
	d := strictDecoder(t)
	for _, tc := range []struct{ doc, want string }{
		{"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replica: 1}\n", `unknown field "spec.replica"`},
		{"apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {clusterIP: None, clusterIP: None}\n", `key "clusterIP" already set`},
		{"apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {publishNotReadyAddresses: yes-please}\n", "publishNotReadyAddresses"},
		{"apiVersion: v1\nkind: Nonsense\nmetadata: {name: x}\n", "Nonsense"},
	} {
		if _, _, err := d.Decode([]byte(tc.doc), nil, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Decode(%q) = %v; want an error containing %q", tc.doc, err, tc.want)
		}
	}
}

func stripComments(b []byte) []byte {
	var out []byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(append(out, l...), '\n')
		}
	}
	return out
}

// TestManifests decodes the manifests strictly and checks what the README
// promises of them: the agents' pods at Guaranteed QoS with whole CPUs
// (what the kubelet's static CPU manager needs to give exclusive cores),
// required anti-affinity on the host name, a headless Service publishing
// not-ready addresses that the coordinator joins, selectors that select
// their pods, every ConfigMap referenced shipped, Secrets mounted for the
// TLS files and the gossip key, the allowlist admitting the example plan's
// target, and the plan valid.
func TestManifests(t *testing.T) {
	m := decodeAll(t)
	if len(m.deployments) != 1 || len(m.statefulSets) != 1 || len(m.jobs) != 1 {
		t.Fatalf("%d Deployments, %d StatefulSets, %d Jobs; want the coordinator, the agents and the coordctl Job",
			len(m.deployments), len(m.statefulSets), len(m.jobs))
	}
	coord, agents, job := m.deployments[0], m.statefulSets[0], m.jobs[0]

	checkSelector(t, "Deployment "+coord.Name, coord.Spec.Selector.MatchLabels, coord.Spec.Template.Labels)
	checkSelector(t, "StatefulSet "+agents.Name, agents.Spec.Selector.MatchLabels, agents.Spec.Template.Labels)
	pods := map[string]*corev1.PodTemplateSpec{
		"Deployment " + coord.Name:   &coord.Spec.Template,
		"StatefulSet " + agents.Name: &agents.Spec.Template,
		"Job " + job.Name:            &job.Spec.Template,
	}
	for what, pod := range pods {
		checkGuaranteed(t, what, &pod.Spec)
		checkNonRoot(t, what, &pod.Spec)
		checkVolumes(t, what, &pod.Spec, m)
	}

	// The agents: one per node, joined through their headless Service.
	anti := agents.Spec.Template.Spec.Affinity
	if anti == nil || anti.PodAntiAffinity == nil || len(anti.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Fatalf("StatefulSet %s: want one required pod anti-affinity term", agents.Name)
	}
	term := anti.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0]
	if term.TopologyKey != corev1.LabelHostname {
		t.Errorf("anti-affinity topologyKey %q, want %q", term.TopologyKey, corev1.LabelHostname)
	}
	if sel, err := metav1LabelSelector(term); err != nil || !sel.Matches(labels.Set(agents.Spec.Template.Labels)) {
		t.Errorf("anti-affinity selector %v does not select the agents' pods (%v): %v", term.LabelSelector, agents.Spec.Template.Labels, err)
	}
	headless := service(t, m, agents.Spec.ServiceName)
	if headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s: clusterIP %q, publishNotReadyAddresses %v; want None and true (headless, every agent's address)",
			headless.Name, headless.Spec.ClusterIP, headless.Spec.PublishNotReadyAddresses)
	}
	checkSelector(t, "Service "+headless.Name, headless.Spec.Selector, agents.Spec.Template.Labels)
	if j := env(t, coord.Spec.Template.Spec.Containers[0], "PHALANX_JOIN"); j != headless.Name+":7946" {
		t.Errorf("coordinator PHALANX_JOIN %q, want the agents' headless Service %s:7946", j, headless.Name)
	}
	agentJoin := env(t, agents.Spec.Template.Spec.Containers[0], "PHALANX_JOIN")
	coordGossip := service(t, m, strings.TrimSuffix(agentJoin, ":7946"))
	if coordGossip.Spec.ClusterIP != corev1.ClusterIPNone || !coordGossip.Spec.PublishNotReadyAddresses {
		t.Errorf("agents join %q: Service %s is not headless with publishNotReadyAddresses", agentJoin, coordGossip.Name)
	}
	checkSelector(t, "Service "+coordGossip.Name, coordGossip.Spec.Selector, coord.Spec.Template.Labels)
	for _, s := range []*corev1.Service{headless, coordGossip} {
		checkTargetPorts(t, s, m)
	}

	// coordctl reaches the coordinator through its Service.
	coordAddr := env(t, job.Spec.Template.Spec.Containers[0], "PHALANX_COORDINATOR")
	host, _, _ := strings.Cut(coordAddr, ":")
	grpcSvc := service(t, m, host)
	checkSelector(t, "Service "+grpcSvc.Name, grpcSvc.Spec.Selector, coord.Spec.Template.Labels)
	checkTargetPorts(t, grpcSvc, m)
	if job.Spec.BackoffLimit == nil || *job.Spec.BackoffLimit != 0 || job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("Job %s: want backoffLimit 0 and restartPolicy Never: a load test is not rerun behind its user's back", job.Name)
	}

	// The allowlist parses and admits the plan's target; the plan is
	// valid as coordctl run reads it.
	allowRef := envFrom(t, agents.Spec.Template.Spec.Containers[0], "PHALANX_ALLOW_TARGETS")
	spec := configMap(t, m, allowRef.Name).Data[allowRef.Key]
	list, err := allow.Parse(spec)
	if err != nil {
		t.Fatalf("ConfigMap %s %s: %v", allowRef.Name, allowRef.Key, err)
	}
	planData := configMap(t, m, "phalanx-plan").Data["plan.yaml"]
	p, err := plan.ParseFile([]byte(planData), func(string) ([]byte, error) { return nil, os.ErrNotExist })
	if err == nil {
		p.SetDefaults()
		err = p.Validate()
	}
	if err != nil {
		t.Fatalf("ConfigMap phalanx-plan plan.yaml: %v", err)
	}
	u, err := url.Parse(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		t.Fatalf("plan url %q: the example's host is an address, so the allowlist can be checked here: %v", p.URL, err)
	}
	if err := list.Check(u.Hostname(), netip.AddrPortFrom(addr, 443)); err != nil {
		t.Errorf("the example plan's target %s is not in the agents' allowlist %q: %v", p.URL, spec, err)
	}
}

// checkGuaranteed fails unless every container of pod (init containers
// too) has CPU and memory requests equal to its limits, with a whole
// number of CPUs: the Guaranteed QoS class (Kubernetes, Configure Quality
// of Service for Pods) that the static CPU manager policy gives exclusive
// cores to.
func checkGuaranteed(t *testing.T, what string, pod *corev1.PodSpec) {
	t.Helper()
	for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, okReq := c.Resources.Requests[r]
			lim, okLim := c.Resources.Limits[r]
			if !okReq || !okLim || req.Cmp(lim) != 0 {
				t.Errorf("%s container %s: %s request %v, limit %v; want both, equal (Guaranteed QoS)", what, c.Name, r, qty(req, okReq), qty(lim, okLim))
			}
		}
		if cpu := c.Resources.Limits[corev1.ResourceCPU]; cpu.MilliValue()%1000 != 0 || cpu.MilliValue() == 0 {
			t.Errorf("%s container %s: %v CPUs, want a whole number (exclusive cores)", what, c.Name, cpu.String())
		}
	}
}

func qty(q resource.Quantity, ok bool) string {
	if !ok {
		return "none"
	}
	return q.String()
}

// checkNonRoot fails unless pod runs as a non-root user with every
// capability dropped and no privilege escalation.
func checkNonRoot(t *testing.T, what string, pod *corev1.PodSpec) {
	t.Helper()
	sc := pod.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("%s: want runAsNonRoot and a non-zero runAsUser", what)
	}
	for _, c := range pod.Containers {
		s := c.SecurityContext
		if s == nil || s.AllowPrivilegeEscalation == nil || *s.AllowPrivilegeEscalation ||
			s.Capabilities == nil || !slices.Equal(s.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(s.Capabilities.Add) != 0 {
			t.Errorf("%s container %s: want allowPrivilegeEscalation false and capabilities drop [ALL], add none", what, c.Name)
		}
	}
}

// checkVolumes fails unless every ConfigMap volume names a shipped
// ConfigMap, every Secret volume one of those the README says to create,
// every mount a volume, and the daemons' TLS and gossip key files lie in
// Secret mounts.
func checkVolumes(t *testing.T, what string, pod *corev1.PodSpec, m manifests) {
	t.Helper()
	secrets := map[string]bool{"phalanx-coordinator-tls": true, "phalanx-agent-tls": true, "phalanx-client-tls": true, "phalanx-gossip": true}
	secretMount := map[string]bool{}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
		switch {
		case v.Secret != nil:
			if !secrets[v.Secret.SecretName] {
				t.Errorf("%s: volume %s: Secret %s is not one the README creates", what, v.Name, v.Secret.SecretName)
			}
		case v.ConfigMap != nil:
			configMap(t, m, v.ConfigMap.Name)
		}
	}
	for _, c := range pod.Containers {
		for _, vm := range c.VolumeMounts {
			v, ok := vols[vm.Name]
			if !ok {
				t.Errorf("%s container %s: mount %s of no volume", what, c.Name, vm.Name)
				continue
			}
			if v.Secret != nil {
				secretMount[vm.MountPath] = true
			}
		}
		for _, e := range c.Env {
			if !slices.Contains([]string{"PHALANX_TLS_CA", "PHALANX_TLS_CERT", "PHALANX_TLS_KEY", "PHALANX_GOSSIP_KEY_FILE"}, e.Name) {
				continue
			}
			if !secretMount[filepath.Dir(e.Value)] {
				t.Errorf("%s container %s: %s=%s is not in a Secret's mount", what, c.Name, e.Name, e.Value)
			}
		}
	}
}

func checkSelector(t *testing.T, what string, selector, podLabels map[string]string) {
	t.Helper()
	if len(selector) == 0 || !labels.SelectorFromSet(selector).Matches(labels.Set(podLabels)) {
		t.Errorf("%s: selector %v does not select the pods labelled %v", what, selector, podLabels)
	}
}

// checkTargetPorts fails unless each of s's named target ports is a port
// of the pods it selects, with the same protocol.
func checkTargetPorts(t *testing.T, s *corev1.Service, m manifests) {
	t.Helper()
	var pods []corev1.PodTemplateSpec
	for _, d := range m.deployments {
		pods = append(pods, d.Spec.Template)
	}
	for _, st := range m.statefulSets {
		pods = append(pods, st.Spec.Template)
	}
	for _, sp := range s.Spec.Ports {
		found := false
		for _, pod := range pods {
			if !labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(pod.Labels)) {
				continue
			}
			for _, c := range pod.Spec.Containers {
				for _, cp := range c.Ports {
					if cp.Name == sp.TargetPort.String() && cp.Protocol == sp.Protocol && cp.ContainerPort == sp.Port {
						found = true
					}
				}
			}
		}
		if !found {
			t.Errorf("Service %s port %s: target %s/%s is no port %d of its pods", s.Name, sp.Name, sp.TargetPort.String(), sp.Protocol, sp.Port)
		}
	}
}

func service(t *testing.T, m manifests, name string) *corev1.Service {
	t.Helper()
	return named(t, "Service", m.services, name)
}

func configMap(t *testing.T, m manifests, name string) *corev1.ConfigMap {
	t.Helper()
	return named(t, "ConfigMap", m.configMaps, name)
}

// named returns the object of objs called name, failing when none is.
func named[T interface{ GetName() string }](t *testing.T, kind string, objs []T, name string) T {
	t.Helper()
	for _, o := range objs {
		if o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %q", kind, name)
	var zero T
	return zero
}

func env(t *testing.T, c corev1.Container, name string) string {
	t.Helper()
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	t.Fatalf("container %s: no %s", c.Name, name)
	return ""
}

func envFrom(t *testing.T, c corev1.Container, name string) *corev1.ConfigMapKeySelector {
	t.Helper()
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
			return e.ValueFrom.ConfigMapKeyRef
		}
	}
	t.Fatalf("container %s: no %s from a ConfigMap", c.Name, name)
	return nil
}

func metav1LabelSelector(term corev1.PodAffinityTerm) (labels.Selector, error) {
	return metav1.LabelSelectorAsSelector(term.LabelSelector)
}
