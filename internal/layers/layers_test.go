// Package layers pins the dependency rules of docs/ARCHITECTURE.md: the
// domain, the order path's consumers, the HTTP layer and what operations
// staff are told reach no engine client, and the product imports nothing
// of the tools module.
package layers

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// engineClients are the modules that talk to an engine.
var engineClients = []string{
	"github.com/redis/go-redis/",
	"github.com/rabbitmq/amqp091-go",
	"github.com/go-sql-driver/mysql",
	"github.com/jmoiron/sqlx",
	"github.com/hibiken/asynq",
}

// engineFree are the packages that must not reach an engine client, even
// indirectly: the domain, the gateway and worker logic, which declare what
// they need as interfaces in the domain's words, the HTTP layer, whose
// admin routes declare theirs in pkg/admin's words, and pkg/admin itself.
var engineFree = []string{
	"surge/pkg/order",
	"surge/pkg/gateway",
	"surge/pkg/worker",
	"surge/pkg/httpapi",
	"surge/pkg/admin",
}

func TestEngineFreePackages(t *testing.T) {
	for _, pkg := range engineFree {
		order, prev := importGraph(t, pkg).walk(pkg)
		reached := map[string]bool{}
		for _, dep := range order { // nearest first: the report names the shortest chain
			for _, c := range engineClients {
				if strings.HasPrefix(dep, c) && !reached[c] {
					reached[c] = true
					t.Errorf("%s reaches %s through %s: it must not depend on an engine client (move the type it needs into surge/pkg/order, or surge/pkg/admin for operations)",
						pkg, c, chain(prev, dep))
				}
			}
		}
	}
}

// graph maps each package to the packages it imports.
type graph map[string][]string

// importGraph is the import graph of pkg and everything it depends on.
func importGraph(t *testing.T, pkg string) graph {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`, pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	g := graph{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		g[f[0]] = f[1:]
	}
	return g
}

// walk visits the packages reachable from from, breadth first: their
// order, and for each the package that first imported it.
func (g graph) walk(from string) (order []string, prev map[string]string) {
	prev = map[string]string{from: ""}
	for queue := []string{from}; len(queue) > 0; queue = queue[1:] {
		order = append(order, queue[0])
		for _, next := range g[queue[0]] {
			if _, seen := prev[next]; !seen {
				prev[next] = queue[0]
				queue = append(queue, next)
			}
		}
	}
	return order, prev
}

// chain is the import chain walk found down to pkg: "a -> b -> pkg".
func chain(prev map[string]string, pkg string) string {
	var p []string
	for ; pkg != ""; pkg = prev[pkg] {
		p = append([]string{pkg}, p...)
	}
	return strings.Join(p, " -> ")
}

func TestDomainImportsNothingOfSurge(t *testing.T) {
	for _, dep := range deps(t, "surge/pkg/order") {
		if strings.HasPrefix(dep, "surge/") && dep != "surge/pkg/order" {
			t.Errorf("surge/pkg/order imports %s: the domain imports nothing of surge", dep)
		}
	}
}

// toolsModule is the module in tools/ (load generator, benchmarks): it
// depends on the product, never the other way round.
const toolsModule = "surge/tools"

// TestProductImportsNothingOfTools: no package of the product module, its
// tests included, imports a package of the tools module.
func TestProductImportsNothingOfTools(t *testing.T) {
	mod, err := os.ReadFile("../../tools/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(string(mod), "\n"); strings.TrimSpace(first) != "module "+toolsModule {
		t.Fatalf("tools/go.mod starts with %q, want module %s", first, toolsModule)
	}
	out, err := exec.Command("go", "list", "-e", "-f",
		`{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, "surge/...").Output()
	if err != nil {
		t.Fatalf("go list surge/...: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		for _, imp := range f[1:] {
			if imp == toolsModule || strings.HasPrefix(imp, toolsModule+"/") {
				t.Errorf("%s imports %s: the product imports nothing of the tools module", f[0], imp)
			}
		}
	}
}

// deps lists the packages pkg depends on, itself included (go list -deps).
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}
