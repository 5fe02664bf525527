package check

import (
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// jobLabel is the Service label whose value the ServiceMonitor makes the job label:
// surge-gateway, surge-worker, ..., as deploy/prometheus.yml names its jobs, so the alerts
// select surge's jobs alone (job=~"surge-.*").
const jobLabel = "surge/job"

// engineUsers are the users deploy/users.sh makes, one Secret each.
var engineUsers = []string{"surge-gateway", "surge-worker", "surge-reconciler", "surge-ops", "surge-exporter"}

// Namespace labels that open surge's ports (networkpolicy.yaml, README).
const (
	everyone     = "everyone"
	adminNS      = "surge/admin=true"
	monitoringNS = "surge/scrape=true"
)

// checkNetworkPolicies: every pod is denied ingress but for what is listed; each named port
// of each Deployment is open to exactly the sources it needs: the gateway's public port to
// everyone, its admin port (admin API, console, /metrics) to the operators' and the
// monitoring namespaces, every other /metrics to the monitoring namespace alone.
func checkNetworkPolicies(t *testing.T, m *manifests) {
	t.Helper()
	deny := false
	for _, p := range m.netpols {
		if len(p.Spec.PodSelector.MatchLabels)+len(p.Spec.PodSelector.MatchExpressions) == 0 &&
			slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) && len(p.Spec.Ingress) == 0 {
			deny = true
		}
	}
	if !deny {
		t.Error("no NetworkPolicy denies ingress to every pod of the namespace by default")
	}
	want := map[string]map[string][]string{
		"gateway":    {"http": {everyone}, "admin": {adminNS, monitoringNS}},
		"worker":     {"metrics": {monitoringNS}},
		"reconciler": {"metrics": {monitoringNS}},
		"exporter":   {"metrics": {monitoringNS}},
	}
	for _, d := range m.deployments {
		ports, ok := want[d.Name]
		if !ok {
			t.Errorf("Deployment %s: no expectation of who may reach it", d.Name)
			continue
		}
		for _, cp := range d.Spec.Template.Spec.Containers[0].Ports {
			got := allowedSources(t, m.netpols, d.Spec.Template.Labels, cp)
			if !reflect.DeepEqual(got, ports[cp.Name]) {
				t.Errorf("Deployment %s port %s: reachable from %v, want %v", d.Name, cp.Name, got, ports[cp.Name])
			}
		}
	}
}

// allowedSources lists who the policies selecting a pod with podLabels let reach port: everyone,
// or "key=value" of the namespaces' labels. Any other kind of peer fails the test: these
// manifests open ports to namespaces, never to addresses or to pods of any namespace.
func allowedSources(t *testing.T, pols []*networkingv1.NetworkPolicy, podLabels map[string]string, port corev1.ContainerPort) []string {
	t.Helper()
	set := map[string]bool{}
	for _, p := range pols {
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
		if err != nil {
			t.Fatalf("NetworkPolicy %s: %v", p.Name, err)
		}
		if !sel.Matches(labels.Set(podLabels)) {
			continue
		}
		for _, rule := range p.Spec.Ingress {
			if !coversPort(rule.Ports, port) {
				continue
			}
			if len(rule.From) == 0 {
				set[everyone] = true
			}
			for _, peer := range rule.From {
				if peer.IPBlock != nil || peer.PodSelector != nil || peer.NamespaceSelector == nil ||
					len(peer.NamespaceSelector.MatchExpressions) > 0 || len(peer.NamespaceSelector.MatchLabels) != 1 {
					t.Errorf("NetworkPolicy %s: peer %+v: want a namespace selected by one label", p.Name, peer)
					continue
				}
				for k, v := range peer.NamespaceSelector.MatchLabels {
					set[k+"="+v] = true
				}
			}
		}
	}
	var out []string
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func coversPort(ports []networkingv1.NetworkPolicyPort, cp corev1.ContainerPort) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Port == nil || p.Port.StrVal == cp.Name || (p.Port.StrVal == "" && p.Port.IntVal == cp.ContainerPort) {
			return true
		}
	}
	return false
}

// TestNetworkPolicyDocumented: the namespace labels the policies name are the ones the README
// tells the platform team to set.
func TestNetworkPolicyDocumented(t *testing.T) {
	readme := readRepoFile(t, "README.md")
	for _, label := range []string{adminNS, monitoringNS} {
		if !strings.Contains(readme, label) {
			t.Errorf("README.md does not tell which namespaces to label %s", label)
		}
	}
}
