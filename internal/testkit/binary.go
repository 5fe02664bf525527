package testkit

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// binaries are the programs built by this test process, by package.
var binaries struct {
	sync.Mutex
	dir   string
	built map[string]string
}

// Binary builds the main package pkg (surge/services/gateway) once per
// test process and returns the executable's path, so that a test runs
// the program as an operator does: its arguments, exit code and output.
// RunWithBinaries removes the executables when the tests end.
func Binary(t testing.TB, pkg string) string {
	t.Helper()
	binaries.Lock()
	defer binaries.Unlock()
	if bin, ok := binaries.built[pkg]; ok {
		return bin
	}
	if binaries.dir == "" {
		dir, err := os.MkdirTemp("", "surge-bin-")
		if err != nil {
			t.Fatal(err)
		}
		binaries.dir, binaries.built = dir, map[string]string{}
	}
	bin := filepath.Join(binaries.dir, path.Base(pkg))
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	binaries.built[pkg] = bin
	return bin
}

// RunWithBinaries runs the tests (a TestMain's m.Run) and removes what
// Binary built; it returns m.Run's code.
func RunWithBinaries(m *testing.M) int {
	code := m.Run()
	binaries.Lock()
	defer binaries.Unlock()
	if binaries.dir != "" {
		_ = os.RemoveAll(binaries.dir)
	}
	return code
}

// Run runs bin with args and env added to the test's environment, for at
// most 30 s, and returns its exit code, stdout and stderr.
func Run(t testing.TB, bin string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return code, out.String(), errb.String()
}
