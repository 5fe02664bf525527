package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"surge/internal/testkit"
)

// TestVersion: the built binary answers --version with exit 0 without
// reading its configuration (a broken one here).
func TestVersion(t *testing.T) {
	bin := testkit.Binary(t, "surge/services/worker")
	cmd := exec.Command(bin, "--version")
	cmd.Env = append(os.Environ(), "SURGE_IDEMPOTENCY_TTL=forever")
	out, err := cmd.Output()
	if err != nil || !strings.HasPrefix(string(out), "worker version ") || !strings.Contains(string(out), " revision ") {
		t.Fatalf("--version: %v, %q", err, out)
	}
}
