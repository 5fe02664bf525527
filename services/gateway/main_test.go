package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"surge/internal/testkit"
)

// TestRefusesWeakAdminTokenOffLoopback: on an address other machines
// reach, the gateway does not start with the default admin token or a
// short one, and says which variable to set and how.
func TestRefusesWeakAdminTokenOffLoopback(t *testing.T) {
	cases := []struct{ addr, token, want string }{
		{"0.0.0.0:0", "", `SURGE_ADMIN_TOKEN is the default "surge-admin"`},
		{":0", "surge-admin", `SURGE_ADMIN_TOKEN is the default "surge-admin"`},
		{"0.0.0.0:0", "too-short", "SURGE_ADMIN_TOKEN has 9 characters, fewer than 16"},
	}
	for _, c := range cases {
		t.Setenv("SURGE_HTTP_ADDR", "127.0.0.1:0")
		t.Setenv("SURGE_ADMIN_ADDR", c.addr)
		if c.token == "" {
			os.Unsetenv("SURGE_ADMIN_TOKEN")
		} else {
			t.Setenv("SURGE_ADMIN_TOKEN", c.token)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err := run(ctx, nil)
		cancel()
		if err == nil {
			t.Fatalf("%s with token %q: the gateway ran", c.addr, c.token)
		}
		for _, w := range []string{c.want, "SURGE_ADMIN_ADDR=" + c.addr, "not a loopback address",
			"SURGE_ADMIN_TOKEN_FILE", "openssl rand -hex 32"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s with token %q: %v\nwant it to say %q", c.addr, c.token, err, w)
			}
		}
	}
}

// TestRefusalExitCode runs the built binary: the refusal is a non-zero
// exit with the reason on stderr.
func TestRefusalExitCode(t *testing.T) {
	bin := testkit.Binary(t, "surge/services/gateway")
	// Bounded: a gateway that wrongly starts would otherwise serve forever.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), "SURGE_HTTP_ADDR=127.0.0.1:0", "SURGE_ADMIN_ADDR=0.0.0.0:0", "SURGE_ADMIN_TOKEN=surge-admin")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("gateway: %v, want exit 1\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "gateway: ") || !strings.Contains(string(out), "SURGE_ADMIN_TOKEN is the default") {
		t.Fatalf("stderr: %s", out)
	}
}

// TestVersion: the built binary prints its version, VCS revision and Go
// version, and exits 0 without reading its configuration (a broken one
// here).
func TestVersion(t *testing.T) {
	bin := testkit.Binary(t, "surge/services/gateway")
	cmd := exec.Command(bin, "--version")
	cmd.Env = append(os.Environ(), "SURGE_IDEMPOTENCY_TTL=forever")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("--version: %v", err)
	}
	f := strings.Fields(string(out))
	if len(f) != 6 || f[0] != "gateway" || f[1] != "version" || f[3] != "revision" || !strings.HasPrefix(f[5], "go1.") {
		t.Fatalf("--version printed %q, want gateway version V revision R goX", out)
	}
	// go build stamps the revision unless -buildvcs=false (this machine's
	// GOFLAGS) or the tree is no checkout; then it says unknown.
	if rev, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil && f[4] != "unknown" &&
		!strings.HasPrefix(f[4], strings.TrimSpace(string(rev))) {
		t.Errorf("revision %s, want the checkout's %s", f[4], rev)
	}
}

// TestRefusesIdempotencyTTLInsideTheGrace: an unknown outcome settles
// within the reconciler's grace (SURGE_RECONCILE_GRACE, 5m), and a retry
// meanwhile must still name the same order: the gateway does not start
// with a shorter idempotency TTL, and says the floor and why.
func TestRefusesIdempotencyTTLInsideTheGrace(t *testing.T) {
	t.Setenv("SURGE_HTTP_ADDR", "127.0.0.1:0")
	t.Setenv("SURGE_ADMIN_ADDR", "127.0.0.1:0")
	t.Setenv("SURGE_IDEMPOTENCY_TTL", "6m")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	err := run(ctx, nil)
	cancel()
	if err == nil {
		t.Fatal("the gateway ran with SURGE_IDEMPOTENCY_TTL=6m and a 5m grace")
	}
	for _, w := range []string{"SURGE_IDEMPOTENCY_TTL=6m0s: must be at least 10m0s", "SURGE_RECONCILE_GRACE"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%v\nwant it to say %q", err, w)
		}
	}
}
