// Package layers pins the dependency rules of docs/ARCHITECTURE.md: the
// domain and the order path's consumers reach no engine client.
package layers

import (
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
// indirectly: the domain, and the gateway and worker logic, which declare
// what they need as interfaces in the domain's words.
var engineFree = []string{
	"surge/pkg/order",
	"surge/pkg/gateway",
	"surge/pkg/worker",
}

func TestEngineFreePackages(t *testing.T) {
	for _, pkg := range engineFree {
		reached := map[string]bool{}
		for _, dep := range deps(t, pkg) {
			for _, c := range engineClients {
				if strings.HasPrefix(dep, c) && !reached[c] {
					reached[c] = true
					t.Errorf("%s reaches %s (%s): it must not depend on an engine client (move the type it needs into surge/pkg/order)", pkg, c, dep)
				}
			}
		}
	}
}

func TestDomainImportsNothingOfSurge(t *testing.T) {
	for _, dep := range deps(t, "surge/pkg/order") {
		if strings.HasPrefix(dep, "surge/") && dep != "surge/pkg/order" {
			t.Errorf("surge/pkg/order imports %s: the domain imports nothing of surge", dep)
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
