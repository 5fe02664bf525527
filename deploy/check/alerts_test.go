package check

import (
	"regexp"
	"strings"
	"testing"
)

// TestAlertsRunbooksAndScope: every alert of deploy/alerts.yml links a section of
// docs/RUNBOOK.md that exists, and every series it or a recording rule reads is selected from
// surge's own jobs (job=~"surge-.*" or one surge job by name), so another team's job never
// fires it. Its promtool tests (deploy/alerts_test.yml) show each firing and not firing.
func TestAlertsRunbooksAndScope(t *testing.T) {
	runbook := readRepoFile(t, "docs/RUNBOOK.md")
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#{2,3} (.+)$`).FindAllStringSubmatch(runbook, -1) {
		anchors[githubAnchor(m[1])] = true
	}
	link := regexp.MustCompile(`^\{\{ or \$externalLabels\.surge_runbook "docs/RUNBOOK\.md" \}\}#([a-z0-9-]+)$`)
	metric := regexp.MustCompile(`\b(surge_[a-z0-9_]+|up)\b(\{[^}]*\})?`)
	scoped := regexp.MustCompile(`job=~"surge-\.\*"|job="surge-[a-z]+"`)
	n := 0
	for _, g := range readAlerts(t).Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			if r.Alert != "" {
				n++
				m := link.FindStringSubmatch(r.Annotations["runbook_url"])
				switch {
				case m == nil:
					t.Errorf("alert %s: runbook_url %q, want a section of docs/RUNBOOK.md", name, r.Annotations["runbook_url"])
				case !anchors[m[1]]:
					t.Errorf("alert %s: docs/RUNBOOK.md has no section #%s", name, m[1])
				}
				for _, a := range []string{"summary", "description"} {
					if r.Annotations[a] == "" {
						t.Errorf("alert %s: no %s", name, a)
					}
				}
				if s := r.Labels["severity"]; s != "critical" && s != "warning" {
					t.Errorf("alert %s: severity %q, want critical or warning", name, s)
				}
			}
			expr := regexp.MustCompile(`"(?:[^"\\]|\\.)*"`).ReplaceAllStringFunc(r.Expr, func(s string) string {
				return strings.ReplaceAll(s, "surge_", "")
			})
			for _, m := range metric.FindAllStringSubmatch(expr, -1) {
				if !scoped.MatchString(m[2]) {
					t.Errorf("%s reads %s%s from every job: select surge's (job=~\"surge-.*\")", name, m[1], m[2])
				}
			}
		}
	}
	if n < 15 {
		t.Errorf("deploy/alerts.yml has %d alerts, want the full set", n)
	}
}

// githubAnchor is the fragment a Markdown heading gets on the usual forges: lower case,
// spaces to '-', punctuation dropped.
func githubAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}
