package check

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "regenerate deploy/kubernetes/prometheusrule.yaml from deploy/alerts.yml")

var k8sDir = filepath.Join(repoRoot, "deploy", "kubernetes")

// The Prometheus Operator's kinds are not in k8s.io/api: these structs hold the fields surge
// uses, and strict decoding rejects any other.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		JobLabel  string               `json:"jobLabel"`
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval,omitempty"`
			ScrapeTimeout string `json:"scrapeTimeout,omitempty"`
		} `json:"endpoints"`
	} `json:"spec"`
}

type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert,omitempty"`
			Record      string            `json:"record,omitempty"`
			Expr        string            `json:"expr"`
			For         string            `json:"for,omitempty"`
			Labels      map[string]string `json:"labels,omitempty"`
			Annotations map[string]string `json:"annotations,omitempty"`
		} `json:"rules"`
	} `json:"groups"`
}

type prometheusRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              ruleGroups `json:"spec"`
}

type kustomization struct {
	APIVersion      string   `json:"apiVersion"`
	Kind            string   `json:"kind"`
	Namespace       string   `json:"namespace"`
	Resources       []string `json:"resources"`
	SecretGenerator []struct {
		Name string   `json:"name"`
		Envs []string `json:"envs"`
	} `json:"secretGenerator"`
	GeneratorOptions struct {
		Labels map[string]string `json:"labels"`
	} `json:"generatorOptions"`
	Images []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
	} `json:"images"`
}

// manifests are the decoded documents of deploy/kubernetes, by kind.
type manifests struct {
	deployments     []*appsv1.Deployment
	services        []*corev1.Service
	configMaps      []*corev1.ConfigMap
	secrets         []*corev1.Secret
	pdbs            []*policyv1.PodDisruptionBudget
	hpas            []*autoscalingv2.HorizontalPodAutoscaler
	jobs            []*batchv1.Job
	cronJobs        []*batchv1.CronJob
	namespaces      []*corev1.Namespace
	netpols         []*networkingv1.NetworkPolicy
	serviceMonitors []*serviceMonitor
	rules           []*prometheusRule
	all             []metav1.Object
}

// splitDocs splits a multi-document YAML file on its "---" lines.
func splitDocs(data []byte) [][]byte {
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		if strings.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(d, "")) != "" {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

// loadManifests decodes every document of dir strictly: an unknown or duplicated field, a
// wrong type or an unknown kind fails the test.
func loadManifests(t *testing.T, dir string) *manifests {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme,
		policyv1.AddToScheme, autoscalingv2.AddToScheme, networkingv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	decoder := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s (%v)", dir, err)
	}
	m := &manifests{}
	for _, file := range files {
		if filepath.Base(file) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range splitDocs(data) {
			where := fmt.Sprintf("%s document %d", filepath.Base(file), i+1)
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			switch tm.APIVersion + " " + tm.Kind {
			case "monitoring.coreos.com/v1 ServiceMonitor":
				var sm serviceMonitor
				if err := yaml.UnmarshalStrict(doc, &sm); err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				m.serviceMonitors = append(m.serviceMonitors, &sm)
				m.all = append(m.all, &sm.ObjectMeta)
				continue
			case "monitoring.coreos.com/v1 PrometheusRule":
				var pr prometheusRule
				if err := yaml.UnmarshalStrict(doc, &pr); err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				m.rules = append(m.rules, &pr)
				m.all = append(m.all, &pr.ObjectMeta)
				continue
			}
			obj, _, err := decoder.Decode(doc, nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			switch o := obj.(type) {
			case *appsv1.Deployment:
				m.deployments = append(m.deployments, o)
			case *corev1.Service:
				m.services = append(m.services, o)
			case *corev1.ConfigMap:
				m.configMaps = append(m.configMaps, o)
			case *corev1.Secret:
				m.secrets = append(m.secrets, o)
			case *policyv1.PodDisruptionBudget:
				m.pdbs = append(m.pdbs, o)
			case *autoscalingv2.HorizontalPodAutoscaler:
				m.hpas = append(m.hpas, o)
			case *batchv1.Job:
				m.jobs = append(m.jobs, o)
			case *batchv1.CronJob:
				m.cronJobs = append(m.cronJobs, o)
			case *corev1.Namespace:
				m.namespaces = append(m.namespaces, o)
			case *networkingv1.NetworkPolicy:
				m.netpols = append(m.netpols, o)
			default:
				t.Fatalf("%s: %T is not a kind surge deploys", where, obj)
			}
			m.all = append(m.all, obj.(metav1.Object))
		}
	}
	return m
}

func (m *manifests) deployment(t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	for _, d := range m.deployments {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("no Deployment %s", name)
	return nil
}

func (m *manifests) configValue(t *testing.T, key string) string {
	t.Helper()
	for _, cm := range m.configMaps {
		if v, ok := cm.Data[key]; ok {
			return v
		}
	}
	t.Fatalf("no ConfigMap sets %s", key)
	return ""
}

func containerPort(c corev1.Container, name string) (int32, bool) {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

// imageBinaries are the programs the image holds (Containerfile, deploy/image.sh).
var imageBinaries = []string{"gateway", "worker", "reconciler", "opsctl"}

// checkPod checks what every surge pod shares: the image, a binary of it, the non-root user
// of the image's passwd, resources, and the Secret of the service's own engine user; the
// migrations' init container, where there is one, reads surge-ops's.
func checkPod(t *testing.T, where string, spec corev1.PodSpec, secret string) {
	t.Helper()
	if spec.SecurityContext == nil || spec.SecurityContext.RunAsNonRoot == nil || !*spec.SecurityContext.RunAsNonRoot ||
		spec.SecurityContext.RunAsUser == nil || *spec.SecurityContext.RunAsUser != imageUID(t) {
		t.Errorf("%s: the pod must run as non-root user %d (deploy/image/passwd)", where, imageUID(t))
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%s: want one container, have %d", where, len(spec.Containers))
	}
	checkContainer(t, where, spec.Containers[0], secret)
	for _, ic := range spec.InitContainers {
		checkContainer(t, where+" init container "+ic.Name, ic, "surge-ops")
	}
}

// consoleEnv is the one inline environment a container may have: the gateway's console
// reads Redis nodes' INFO as the exporter's user, whose password stays in its Secret.
var consoleEnv = []string{"SURGE_CONSOLE_REDIS_USER", "SURGE_CONSOLE_REDIS_PASSWORD"}

func checkContainer(t *testing.T, where string, c corev1.Container, secret string) {
	t.Helper()
	if c.Image != "surge" {
		t.Errorf("%s: image %q, want surge (kustomization.yaml's images retags it)", where, c.Image)
	}
	if len(c.Command) == 0 || !slices.Contains(imageBinaries, strings.TrimPrefix(c.Command[0], "/usr/local/bin/")) ||
		!strings.HasPrefix(c.Command[0], "/usr/local/bin/") {
		t.Errorf("%s: command %q does not start with one of the image's /usr/local/bin/%v", where, c.Command, imageBinaries)
	} else if bin := filepath.Base(c.Command[0]); len(c.Command) < 2 || !productCode(t).commands[bin][c.Command[1]] {
		t.Errorf("%s: %q: services/%s accepts none of these as its command", where, c.Command, bin)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[r]; !ok {
			t.Errorf("%s: no %s request", where, r)
		}
	}
	if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
		t.Errorf("%s: no memory limit", where)
	}
	if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem ||
		c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation {
		t.Errorf("%s: want a read-only root file system and no privilege escalation", where)
	}
	var secrets []string
	for _, e := range c.EnvFrom {
		if e.SecretRef != nil {
			secrets = append(secrets, e.SecretRef.Name)
		}
	}
	if !reflect.DeepEqual(secrets, []string{secret}) {
		t.Errorf("%s: reads Secrets %v, want only %s (its own engine user)", where, secrets, secret)
	}
	for _, e := range c.Env {
		if !slices.Contains(consoleEnv, e.Name) {
			t.Errorf("%s: inline env %s: settings belong in the ConfigMap, credentials in a Secret", where, e.Name)
		}
		if e.Name == "SURGE_CONSOLE_REDIS_USER" && e.Value != "surge-exporter" {
			t.Errorf("%s: SURGE_CONSOLE_REDIS_USER=%q, want surge-exporter (INFO, no key)", where, e.Value)
		}
		if e.Name == "SURGE_CONSOLE_REDIS_PASSWORD" && (e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
			e.ValueFrom.SecretKeyRef.Name != "surge-exporter" || e.ValueFrom.SecretKeyRef.Key != "SURGE_REDIS_PASSWORD") {
			t.Errorf("%s: SURGE_CONSOLE_REDIS_PASSWORD must come from the Secret surge-exporter, key SURGE_REDIS_PASSWORD", where)
		}
	}
}

func imageUID(t *testing.T) int64 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "image", "passwd"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(line, ":")
		if len(f) == 7 && f[0] == "surge" {
			var uid int64
			fmt.Sscan(f[2], &uid)
			return uid
		}
	}
	t.Fatal("deploy/image/passwd has no surge user")
	return 0
}

func checkHTTPProbe(t *testing.T, where string, p *corev1.Probe, c corev1.Container, routes map[string]bool, path string) {
	t.Helper()
	if p == nil || p.HTTPGet == nil {
		t.Errorf("%s: no HTTP probe (want GET %s)", where, path)
		return
	}
	if p.HTTPGet.Path != path {
		t.Errorf("%s: probe path %s, want %s", where, p.HTTPGet.Path, path)
	}
	if !routes[p.HTTPGet.Path] {
		t.Errorf("%s: probe path %s is not served by the code", where, p.HTTPGet.Path)
	}
	if p.HTTPGet.Port.Type != intstr.String {
		t.Errorf("%s: probe port %s: name the container port", where, p.HTTPGet.Port.String())
	} else if _, ok := containerPort(c, p.HTTPGet.Port.StrVal); !ok {
		t.Errorf("%s: probe port %s is not a port of the container", where, p.HTTPGet.Port.StrVal)
	}
}

// TestKubernetesManifests decodes deploy/kubernetes strictly and checks it against the code.
func TestKubernetesManifests(t *testing.T) {
	m := loadManifests(t, k8sDir)
	c := productCode(t)

	for _, o := range m.all {
		if o.GetLabels()["app.kubernetes.io/part-of"] != "surge" {
			t.Errorf("%s: no label app.kubernetes.io/part-of=surge", o.GetName())
		}
	}

	// Each long-running service: its port is the one the code listens on (by default and as
	// the ConfigMap or its flag opens it to the pod), its probes are routes the code serves.
	type svc struct {
		name, bin, secret, addrVar, portName string
		routes                               map[string]bool
		ready                                string
		replicas                             int32 // 0: the autoscaler owns them
		migrates                             bool  // reads MySQL: migrations first
	}
	for _, s := range []svc{
		{"gateway", "gateway", "surge-gateway", "HTTP_ADDR", "http", c.routes["gateway"], "/readyz", 0, true},
		{"worker", "worker", "surge-worker", "WORKER_METRICS_ADDR", "metrics", c.routes["metrics"], "/healthz", 0, true},
		{"reconciler", "reconciler", "surge-reconciler", "RECONCILE_METRICS_ADDR", "metrics", c.routes["metrics"], "/healthz", 1, true},
		{"exporter", "opsctl", "surge-exporter", "", "metrics", c.routes["metrics"], "/healthz", 1, false},
	} {
		d := m.deployment(t, s.name)
		where := "Deployment " + s.name
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("%s: its selector does not match its pod template (%v)", where, err)
		}
		if d.Spec.Template.Labels["app.kubernetes.io/component"] != s.name {
			t.Errorf("%s: pods labelled component=%s", where, d.Spec.Template.Labels["app.kubernetes.io/component"])
		}
		switch {
		case s.replicas == 0 && d.Spec.Replicas != nil:
			t.Errorf("%s: replicas %d: its HorizontalPodAutoscaler owns the count, and every apply would reset it", where, *d.Spec.Replicas)
		case s.replicas > 0 && (d.Spec.Replicas == nil || *d.Spec.Replicas != s.replicas):
			t.Errorf("%s: want %d replicas", where, s.replicas)
		}
		checkPod(t, where, d.Spec.Template.Spec, s.secret)
		// Migrations before the service: opsctl migrate in an init container.
		inits := d.Spec.Template.Spec.InitContainers
		if s.migrates && (len(inits) != 1 || !reflect.DeepEqual(inits[0].Command, []string{"/usr/local/bin/opsctl", "migrate"})) {
			t.Errorf("%s: want one init container running opsctl migrate, so no pod starts on an older schema", where)
		}
		if !s.migrates && len(inits) > 0 {
			t.Errorf("%s: init containers %v: it reads no MySQL", where, inits)
		}
		ctr := d.Spec.Template.Spec.Containers[0]
		if filepath.Base(ctr.Command[0]) != s.bin {
			t.Errorf("%s: runs %s, want %s", where, ctr.Command[0], s.bin)
		}
		port, ok := containerPort(ctr, s.portName)
		if !ok {
			t.Fatalf("%s: no container port named %s", where, s.portName)
		}
		var listen, def string
		if s.addrVar != "" {
			listen, def = m.configValue(t, "SURGE_"+s.addrVar), c.envDefault[s.addrVar]
		} else {
			i := slices.Index(ctr.Command, "--addr")
			if i < 0 || i+1 >= len(ctr.Command) {
				t.Fatalf("%s: %q: no --addr", where, ctr.Command)
			}
			listen, def = ctr.Command[i+1], c.exporterAddr
		}
		if got := portOf(t, listen); got != int(port) {
			t.Errorf("%s: listens on %s but the container port is %d", where, listen, port)
		}
		if got := portOf(t, def); got != int(port) {
			t.Errorf("%s: container port %d, the code's default is %s", where, port, def)
		}
		if !strings.HasPrefix(listen, "0.0.0.0:") {
			t.Errorf("%s: listens on %s: a probe or Service cannot reach a loopback address", where, listen)
		}
		checkHTTPProbe(t, where+" readiness", ctr.ReadinessProbe, ctr, s.routes, s.ready)
		checkHTTPProbe(t, where+" liveness", ctr.LivenessProbe, ctr, s.routes, "/healthz")
		if d.Spec.Template.Spec.TerminationGracePeriodSeconds == nil || *d.Spec.Template.Spec.TerminationGracePeriodSeconds < 15 {
			t.Errorf("%s: the grace period must cover the service's drain", where)
		}

		// Its Service selects these pods and forwards to that port by name.
		var found bool
		for _, sv := range m.services {
			if sv.Name != s.name {
				continue
			}
			found = true
			if !labels.SelectorFromSet(sv.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
				t.Errorf("Service %s does not select the pods of %s", sv.Name, where)
			}
			want := 1
			if s.name == "gateway" {
				want = 2 // and the admin listener's port, checked below
			}
			if len(sv.Spec.Ports) != want || sv.Spec.Ports[0].Name != s.portName || sv.Spec.Ports[0].TargetPort.StrVal != s.portName {
				t.Errorf("Service %s: ports %+v, want %d, the first named %s to the container port %s", sv.Name, sv.Spec.Ports, want, s.portName, s.portName)
			}
			if sv.Labels["app.kubernetes.io/component"] != s.name || sv.Labels[jobLabel] != "surge-"+s.name {
				t.Errorf("Service %s: labels %v, want component=%s and %s=surge-%s (the job label)", sv.Name, sv.Labels, s.name, jobLabel, s.name)
			}
		}
		if !found {
			t.Errorf("no Service %s", s.name)
		}
	}

	// The gateway's admin listener (admin API, console, /metrics): its container port is the
	// one SURGE_ADMIN_ADDR opens and the code's default, and its Service forwards to it.
	gw := m.deployment(t, "gateway").Spec.Template.Spec.Containers[0]
	if port, ok := containerPort(gw, "admin"); !ok {
		t.Errorf("Deployment gateway: no container port named admin")
	} else {
		listen := m.configValue(t, "SURGE_ADMIN_ADDR")
		if portOf(t, listen) != int(port) || portOf(t, c.envDefault["ADMIN_ADDR"]) != int(port) || !strings.HasPrefix(listen, "0.0.0.0:") {
			t.Errorf("Deployment gateway: admin port %d, SURGE_ADMIN_ADDR %s, the code's default %s", port, listen, c.envDefault["ADMIN_ADDR"])
		}
	}
	for _, sv := range m.services {
		if sv.Name == "gateway" && (len(sv.Spec.Ports) < 2 || sv.Spec.Ports[1].Name != "admin" || sv.Spec.Ports[1].TargetPort.StrVal != "admin") {
			t.Errorf("Service gateway: ports %+v, want the second named admin to the container port admin", sv.Spec.Ports)
		}
	}

	// The gateway and the worker are scaled and protected from voluntary disruption, and
	// their memory limit leaves room above the soft limit they set (pkg/app/gc.go, 512 MiB).
	for _, name := range []string{"gateway", "worker"} {
		d := m.deployment(t, name)
		if lim := d.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]; lim.Value() <= 512<<20 {
			t.Errorf("Deployment %s: memory limit %s is not above the 512 MiB soft limit the program sets", name, lim.String())
		}
		var pdb, hpa bool
		for _, p := range m.pdbs {
			sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
			if err == nil && sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				pdb = true
				// minAvailable 1 of up to the autoscaler's max lets an eviction take all
				// pods but one at once; maxUnavailable bounds it whatever the count.
				if p.Spec.MinAvailable != nil || p.Spec.MaxUnavailable == nil {
					t.Errorf("PodDisruptionBudget %s: want maxUnavailable (1 or a percentage), not minAvailable", p.Name)
				}
			}
		}
		for _, h := range m.hpas {
			if h.Spec.ScaleTargetRef.Kind == "Deployment" && h.Spec.ScaleTargetRef.Name == name {
				hpa = true
				if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 2 || h.Spec.MaxReplicas < *h.Spec.MinReplicas {
					t.Errorf("HorizontalPodAutoscaler %s: want at least 2 replicas and max >= min", h.Name)
				}
			}
		}
		if !pdb || !hpa {
			t.Errorf("Deployment %s: PodDisruptionBudget %v, HorizontalPodAutoscaler %v: want both", name, pdb, hpa)
		}
	}
	for _, p := range m.pdbs {
		sel, _ := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		n := 0
		for _, d := range m.deployments {
			if sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("PodDisruptionBudget %s selects the pods of %d Deployments, want 1", p.Name, n)
		}
	}

	// Migrations run in the init containers above: no Job to delete before each image.
	if len(m.jobs) != 0 {
		t.Errorf("%d Jobs: the migrations run in the services' init containers", len(m.jobs))
	}

	// The reconciler's alternative: reconciler once on a schedule, suspended while the
	// Deployment runs.
	if len(m.cronJobs) != 1 {
		t.Fatalf("want one CronJob (reconciler once), have %d", len(m.cronJobs))
	}
	cj := m.cronJobs[0]
	checkPod(t, "CronJob "+cj.Name, cj.Spec.JobTemplate.Spec.Template.Spec, "surge-reconciler")
	if cmd := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Command; len(cmd) < 2 || cmd[0] != "/usr/local/bin/reconciler" || cmd[1] != "once" {
		t.Errorf("CronJob %s runs %q, want reconciler once", cj.Name, cmd)
	}
	if slices.Contains(cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Command, "--detailed-exitcode") {
		t.Errorf("CronJob %s: --detailed-exitcode makes a run that repaired drift a failed Job", cj.Name)
	}
	if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("CronJob %s: concurrencyPolicy %s, want Forbid", cj.Name, cj.Spec.ConcurrencyPolicy)
	}
	if rec := m.deployment(t, "reconciler"); *rec.Spec.Replicas > 0 && (cj.Spec.Suspend == nil || !*cj.Spec.Suspend) {
		t.Errorf("CronJob %s and Deployment reconciler both run: suspend one", cj.Name)
	}

	// Settings and credentials: every variable is one the code reads; every Secret belongs to
	// one engine user and holds placeholders only.
	for _, cm := range m.configMaps {
		for k := range cm.Data {
			if _, ok := c.envDefault[strings.TrimPrefix(k, "SURGE_")]; !ok || !strings.HasPrefix(k, "SURGE_") {
				t.Errorf("ConfigMap %s: %s is not a variable the code reads", cm.Name, k)
			}
			if strings.Contains(k, "PASSWORD") || strings.Contains(k, "TOKEN") || strings.Contains(k, "DSN") || strings.Contains(k, "URL") {
				t.Errorf("ConfigMap %s: %s is a credential: put it in a Secret", cm.Name, k)
			}
		}
	}
	// No Secret is committed: kustomization.yaml generates them from the operator's files.
	for _, s := range m.secrets {
		t.Errorf("Secret %s is committed: generate it (kustomization.yaml, secretGenerator)", s.Name)
	}
	if err := filepath.WalkDir(k8sDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err == nil && (bytes.Contains(data, []byte("REPLACE-ME")) || bytes.Contains(bytes.ToLower(data), []byte("changeme"))) {
			t.Errorf("%s holds a placeholder credential", path)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}

	checkNetworkPolicies(t, m)
	checkMonitoring(t, m)
	checkKustomization(t)
}

// checkMonitoring: the ServiceMonitor scrapes every surge Service on a port it has, with the
// job names the alerts use, and the PrometheusRule is deploy/alerts.yml.
func checkMonitoring(t *testing.T, m *manifests) {
	t.Helper()
	if len(m.serviceMonitors) != 1 {
		t.Fatalf("want one ServiceMonitor, have %d", len(m.serviceMonitors))
	}
	sm := m.serviceMonitors[0]
	sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	jobs := map[string]bool{}
	for _, sv := range m.services {
		if !sel.Matches(labels.Set(sv.Labels)) {
			t.Errorf("ServiceMonitor %s does not select Service %s", sm.Name, sv.Name)
			continue
		}
		if sm.Spec.JobLabel != jobLabel {
			t.Errorf("ServiceMonitor %s: jobLabel %s, want %s", sm.Name, sm.Spec.JobLabel, jobLabel)
		}
		job, ok := sv.Labels[sm.Spec.JobLabel]
		if !ok {
			t.Errorf("Service %s has no label %s (the ServiceMonitor's jobLabel)", sv.Name, sm.Spec.JobLabel)
		}
		jobs[job] = true
		scraped := false
		for _, ep := range sm.Spec.Endpoints {
			for _, p := range sv.Spec.Ports {
				if p.Name == ep.Port && ep.Path == "/metrics" {
					scraped = true
				}
			}
		}
		if !scraped {
			t.Errorf("Service %s: no ServiceMonitor endpoint scrapes /metrics on one of its ports", sv.Name)
		}
	}
	if len(m.rules) != 1 {
		t.Fatalf("want one PrometheusRule, have %d", len(m.rules))
	}
	alerts := readAlerts(t)
	if !reflect.DeepEqual(m.rules[0].Spec, alerts) {
		t.Errorf("PrometheusRule %s differs from deploy/alerts.yml: regenerate it with\n"+
			"  cd deploy/check && go test -run TestKubernetesManifests -update", m.rules[0].Name)
	}
	for _, g := range alerts.Groups {
		for _, r := range g.Rules {
			for _, sub := range regexp.MustCompile(`job="([^"]+)"`).FindAllStringSubmatch(r.Expr, -1) {
				if !jobs[sub[1]] {
					t.Errorf("alert %s reads job=%q, which no scraped Service is (jobs: %v)", r.Alert, sub[1], keys(jobs))
				}
			}
		}
	}
}

func keys(m map[string]bool) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func readAlerts(t *testing.T) ruleGroups {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var g ruleGroups
	if err := yaml.UnmarshalStrict(data, &g); err != nil {
		t.Fatalf("deploy/alerts.yml: %v", err)
	}
	return g
}

const ruleHeader = `# Generated from deploy/alerts.yml; do not edit: change deploy/alerts.yml, then run
#   cd deploy/check && go test -run TestKubernetesManifests -update
# (make test-deploy fails while the two differ).
`

// TestMain regenerates prometheusrule.yaml before the tests when -update is given.
func TestMain(m *testing.M) {
	flag.Parse()
	if *update {
		if err := writeRule(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

func writeRule() error {
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "alerts.yml"))
	if err != nil {
		return err
	}
	var g ruleGroups
	if err := yaml.UnmarshalStrict(data, &g); err != nil {
		return err
	}
	pr := prometheusRule{Spec: g}
	pr.APIVersion, pr.Kind = "monitoring.coreos.com/v1", "PrometheusRule"
	pr.Name = "surge"
	pr.Labels = map[string]string{"app.kubernetes.io/name": "surge", "app.kubernetes.io/part-of": "surge"}
	out, err := yaml.Marshal(struct {
		APIVersion string     `json:"apiVersion"`
		Kind       string     `json:"kind"`
		Metadata   any        `json:"metadata"`
		Spec       ruleGroups `json:"spec"`
	}{pr.APIVersion, pr.Kind, map[string]any{"name": pr.Name, "labels": pr.Labels}, pr.Spec})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(k8sDir, "prometheusrule.yaml"), append([]byte(ruleHeader), out...), 0o644)
}

// checkKustomization: kustomization.yaml lists every manifest of the directory, and only those.
func checkKustomization(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(k8sDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(k8sDir, "*.yaml"))
	var want []string
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" {
			want = append(want, b)
		}
	}
	got := slices.Clone(k.Resources)
	sort.Strings(got)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("kustomization.yaml resources %v, the directory holds %v", got, want)
	}
	var gen []string
	for _, g := range k.SecretGenerator {
		gen = append(gen, g.Name)
		if !reflect.DeepEqual(g.Envs, []string{"secrets/" + g.Name + ".env"}) {
			t.Errorf("kustomization.yaml: Secret %s from %v, want secrets/%s.env", g.Name, g.Envs, g.Name)
		}
	}
	if !reflect.DeepEqual(gen, engineUsers) {
		t.Errorf("kustomization.yaml generates Secrets %v, want one per engine user %v", gen, engineUsers)
	}
	if k.Namespace == "" || len(k.Images) != 1 || k.Images[0].Name != "surge" {
		t.Errorf("kustomization.yaml: want a namespace and the image surge under images")
	}
	if !bytes.Contains(data, []byte("kind: Kustomization")) {
		t.Error("kustomization.yaml is not a Kustomization")
	}
}
