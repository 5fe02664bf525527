package check

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// repoRoot is the surge repository this module sits in (deploy/check).
var repoRoot = filepath.Join("..", "..")

// code is what the deployment files must agree with, read from the product's Go sources
// (parsed, not imported: this module does not depend on the product's packages).
type code struct {
	// envDefault maps every envconfig variable the programs read (without SURGE_) to its
	// default tag ("" when it has none).
	envDefault map[string]string
	// routes holds the GET paths served: "gateway" (pkg/httpapi, pkg/app: the public
	// listener), "admin" (the gateway's admin listener, HandleAdmin) and "metrics"
	// (pkg/metrics's endpoint, which the worker, the reconciler and the exporter serve).
	routes map[string]map[string]bool
	// commands holds, per binary, the first arguments its main accepts.
	commands map[string]map[string]bool
	// exporterAddr is the default of `opsctl exporter --addr`.
	exporterAddr string
}

var (
	codeOnce sync.Once
	codeVal  code
)

func parseDir(t *testing.T, dir string) []*ast.File {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(filepath.Join(repoRoot, dir))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(repoRoot, dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

func parseDirs(t *testing.T, dirs ...string) []*ast.File {
	var files []*ast.File
	for _, d := range dirs {
		files = append(files, parseDir(t, d)...)
	}
	return files
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// productCode parses the sources once per test binary.
func productCode(t *testing.T) code {
	t.Helper()
	codeOnce.Do(func() {
		c := code{envDefault: map[string]string{}, routes: map[string]map[string]bool{},
			commands: map[string]map[string]bool{}}
		for _, dir := range []string{"pkg/config", "pkg/app", "services/reconciler", "services/opsctl"} {
			for _, f := range parseDir(t, dir) {
				ast.Inspect(f, func(n ast.Node) bool {
					field, ok := n.(*ast.Field)
					if !ok || field.Tag == nil {
						return true
					}
					tag, _ := strconv.Unquote(field.Tag.Value)
					st := reflect.StructTag(tag)
					if name, ok := st.Lookup("envconfig"); ok {
						c.envDefault[name] = st.Get("default")
					}
					return true
				})
			}
		}
		c.routes["admin"] = map[string]bool{}
		for src, dirs := range map[string][]string{"gateway": {"pkg/httpapi", "pkg/app"}, "metrics": {"pkg/metrics"}} {
			c.routes[src] = map[string]bool{}
			for _, f := range parseDirs(t, dirs...) {
				ast.Inspect(f, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok || len(call.Args) == 0 {
						return true
					}
					sel, ok := call.Fun.(*ast.SelectorExpr)
					if !ok || (sel.Sel.Name != "HandleFunc" && sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleAdmin") {
						return true
					}
					// HandleAdmin mounts a route on the gateway's admin listener.
					dst := src
					if sel.Sel.Name == "HandleAdmin" {
						dst = "admin"
					}
					if pat, ok := stringLit(call.Args[0]); ok {
						if method, path, ok := strings.Cut(pat, " "); ok && method == "GET" {
							c.routes[dst][path] = true
						}
					}
					return true
				})
			}
		}
		for _, bin := range []string{"gateway", "worker", "reconciler", "opsctl"} {
			c.commands[bin] = map[string]bool{}
			for _, f := range parseDir(t, "services/"+bin) {
				ast.Inspect(f, func(n ast.Node) bool {
					switch n := n.(type) {
					case *ast.BinaryExpr: // args[0] == "serve"
						if idx, ok := n.X.(*ast.IndexExpr); ok && n.Op == token.EQL {
							if id, ok := idx.X.(*ast.Ident); ok && id.Name == "args" {
								if s, ok := stringLit(n.Y); ok {
									c.commands[bin][s] = true
								}
							}
						}
					case *ast.AssignStmt: // commands["migrate"] = command{...}
						for _, lhs := range n.Lhs {
							if idx, ok := lhs.(*ast.IndexExpr); ok {
								if id, ok := idx.X.(*ast.Ident); ok && id.Name == "commands" {
									if s, ok := stringLit(idx.Index); ok {
										c.commands[bin][s] = true
									}
								}
							}
						}
					case *ast.KeyValueExpr: // cobra.Command{Use: "migrate", ...}
						if key, ok := n.Key.(*ast.Ident); ok && key.Name == "Use" {
							if s, ok := stringLit(n.Value); ok && s != "" {
								c.commands[bin][strings.Fields(s)[0]] = true
							}
						}
					case *ast.CallExpr: // fs.StringVar(&addr, "addr", "127.0.0.1:9121", ...) in the exporter
						if sel, ok := n.Fun.(*ast.SelectorExpr); ok && bin == "opsctl" {
							args := n.Args
							if sel.Sel.Name == "StringVar" && len(args) >= 3 {
								args = args[1:]
							} else if sel.Sel.Name != "String" || len(args) < 2 {
								break
							}
							if name, _ := stringLit(args[0]); name == "addr" {
								c.exporterAddr, _ = stringLit(args[1])
							}
						}
					}
					return true
				})
			}
		}
		codeVal = c
	})
	return codeVal
}

// portOf returns the port of host:port.
func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return n
}

// TestProductCodeParsed guards the parsing itself: if the code moved, the checks below would
// compare against nothing.
func TestProductCodeParsed(t *testing.T) {
	c := productCode(t)
	for _, v := range []string{"HTTP_ADDR", "WORKER_METRICS_ADDR", "RECONCILE_METRICS_ADDR", "REDIS_ADDRS", "MYSQL_DSN"} {
		if c.envDefault[v] == "" {
			t.Errorf("no default found for SURGE_%s in the code", v)
		}
	}
	for _, r := range []struct{ src, path string }{{"gateway", "/readyz"}, {"gateway", "/healthz"}, {"admin", "/metrics"}, {"metrics", "/healthz"}, {"metrics", "/metrics"}} {
		if !c.routes[r.src][r.path] {
			t.Errorf("route GET %s not found in %s's code", r.path, r.src)
		}
	}
	if c.exporterAddr == "" {
		t.Error("opsctl exporter's --addr default not found")
	}
	for bin, cmd := range map[string]string{"gateway": "serve", "worker": "run", "reconciler": "once", "opsctl": "migrate"} {
		if !c.commands[bin][cmd] {
			t.Errorf("%s %s not found in services/%s", bin, cmd, bin)
		}
	}
}
