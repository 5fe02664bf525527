package check

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestImageScriptBuildsLinux runs deploy/image.sh's binary step as `make image
// IMAGE_GOARCH=arm64` does, on this host: the binary it makes is a static Linux one of the
// asked architecture, whatever the host, so an image built on a Mac or for arm64 nodes starts.
// Only the health probe is built (the smallest; every binary goes through the same lines).
func TestImageScriptBuildsLinux(t *testing.T) {
	make := readRepoFile(t, "Makefile")
	if !regexp.MustCompile(`(?m)^IMAGE_GOARCH \?= amd64$`).MatchString(make) ||
		!strings.Contains(make, "GOOS=linux GOARCH=$(IMAGE_GOARCH) deploy/image.sh") {
		t.Error("Makefile: make image must set GOOS=linux and GOARCH=$(IMAGE_GOARCH), amd64 by default")
	}
	dir := t.TempDir()
	cmd := exec.Command(filepath.Join(repoRoot, "deploy", "image.sh"), "binaries")
	cmd.Env = append(os.Environ(), "GOOS=darwin", "GOARCH=arm64", "CGO_ENABLED=1",
		"SURGE_IMAGE_BINS=healthcheck", "SURGE_IMAGE_BIN_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("deploy/image.sh binaries: %v\n%s", err, out)
	}
	f, err := elf.Open(filepath.Join(dir, "healthcheck"))
	if err != nil {
		t.Fatalf("the binary is not an ELF (Linux) executable: %v", err)
	}
	defer f.Close()
	if f.Machine != elf.EM_AARCH64 {
		t.Errorf("built for %v, want arm64 (GOARCH)", f.Machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has a program interpreter: it is dynamic, a scratch image cannot run it")
		}
	}
}

// TestContainerfileExposesEveryListener: EXPOSE names every port the programs listen on by
// default: the public API, the gateway's admin listener, each /metrics.
func TestContainerfileExposesEveryListener(t *testing.T) {
	c := productCode(t)
	m := regexp.MustCompile(`(?m)^EXPOSE (.+)$`).FindStringSubmatch(readRepoFile(t, "Containerfile"))
	if m == nil {
		t.Fatal("Containerfile: no EXPOSE")
	}
	exposed := strings.Fields(m[1])
	for _, addr := range []string{c.envDefault["HTTP_ADDR"], c.envDefault["ADMIN_ADDR"], c.envDefault["WORKER_METRICS_ADDR"],
		c.envDefault["RECONCILE_METRICS_ADDR"], c.exporterAddr} {
		_, port, _ := strings.Cut(addr, ":")
		if port == "" || !slices.Contains(exposed, port) {
			t.Errorf("Containerfile: EXPOSE %v lacks %s (the default %s)", exposed, port, addr)
		}
	}
}
