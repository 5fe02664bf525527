//go:build image

package check

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The image test reads the image `make image` built (SURGE_IMAGE, default surge) as a
// container engine would: it exports it (docker save where a Docker engine answers, buildah
// push to an OCI archive otherwise), reads its configuration, unpacks its layers, and runs
// each binary inside that file system (chroot, as the image's user, when the test runs as
// root). No container is started: this machine cannot run one.
//
//	make test-image          (builds the image first)

// maxImageBytes bounds the image: four static services of about 25 MB each
// (the OTLP exporter and its protobuf and gRPC status packages are most of
// the growth from about 14 MB) and the probe, with room for a little more;
// a multi-call binary would hold them in about a quarter of that.
const maxImageBytes = 128 << 20

type imageConfig struct {
	Config struct {
		User         string
		Env          []string
		Entrypoint   []string
		Cmd          []string
		ExposedPorts map[string]struct{}
		Labels       map[string]string
	} `json:"config"`
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
}

func dockerAnswers() bool {
	if _, err := exec.LookPath("docker"); err != nil {
		return false
	}
	return exec.Command("docker", "info").Run() == nil
}

// exportImage writes the image as a tar archive (OCI layout or docker save's) and returns
// the archive's files by name.
func exportImage(t *testing.T, image string) (map[string][]byte, int64) {
	t.Helper()
	archive := filepath.Join(t.TempDir(), "image.tar")
	var cmd *exec.Cmd
	switch builder := os.Getenv("SURGE_IMAGE_BUILDER"); {
	case builder == "docker" || (builder == "" && dockerAnswers()):
		cmd = exec.Command("docker", "save", "-o", archive, image)
	default:
		cmd = exec.Command("buildah", "push", "--quiet", image, "oci-archive:"+archive)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s(run make image first)", strings.Join(cmd.Args, " "), err, out)
	}
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[path.Clean(h.Name)] = data
	}
	return files, st.Size()
}

// configAndLayers finds the image's configuration and its layers, in order, in an OCI
// layout (index.json) or docker save's archive (manifest.json).
func configAndLayers(t *testing.T, files map[string][]byte) ([]byte, [][]byte) {
	t.Helper()
	blob := func(digest string) []byte {
		algo, hex, _ := strings.Cut(digest, ":")
		b, ok := files[path.Join("blobs", algo, hex)]
		if !ok {
			t.Fatalf("blob %s missing from the archive", digest)
		}
		return b
	}
	if m, ok := files["manifest.json"]; ok {
		var manifests []struct {
			Config string
			Layers []string
		}
		if err := json.Unmarshal(m, &manifests); err != nil || len(manifests) != 1 {
			t.Fatalf("manifest.json: %v (%d images)", err, len(manifests))
		}
		var layers [][]byte
		for _, l := range manifests[0].Layers {
			layers = append(layers, files[path.Clean(l)])
		}
		return files[path.Clean(manifests[0].Config)], layers
	}
	type descriptor struct {
		MediaType string `json:"mediaType"`
		Digest    string `json:"digest"`
	}
	var index struct{ Manifests []descriptor }
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %v (%d manifests)", err, len(index.Manifests))
	}
	var manifest struct {
		Config descriptor
		Layers []descriptor
	}
	if err := json.Unmarshal(blob(index.Manifests[0].Digest), &manifest); err != nil {
		t.Fatal(err)
	}
	var layers [][]byte
	for _, l := range manifest.Layers {
		layers = append(layers, blob(l.Digest))
	}
	return blob(manifest.Config.Digest), layers
}

// unpack extracts the layers into dir and returns the bytes of the files they hold.
func unpack(t *testing.T, layers [][]byte, dir string) int64 {
	t.Helper()
	var total int64
	for i, layer := range layers {
		var r io.Reader = bytes.NewReader(layer)
		if len(layer) > 2 && layer[0] == 0x1f && layer[1] == 0x8b {
			zr, err := gzip.NewReader(r)
			if err != nil {
				t.Fatal(err)
			}
			r = zr
		}
		tr := tar.NewReader(r)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("layer %d: %v", i, err)
			}
			name := filepath.Join(dir, filepath.FromSlash(path.Clean("/"+h.Name)))
			switch h.Typeflag {
			case tar.TypeDir:
				if err := os.MkdirAll(name, 0o755); err != nil {
					t.Fatal(err)
				}
			case tar.TypeReg:
				if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
					t.Fatal(err)
				}
				f, err := os.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, os.FileMode(h.Mode)&0o777)
				if err != nil {
					t.Fatal(err)
				}
				n, err := io.Copy(f, tr)
				f.Close()
				if err != nil {
					t.Fatal(err)
				}
				total += n
			case tar.TypeSymlink:
				_ = os.Symlink(h.Linkname, name)
			}
		}
	}
	return total
}

// TestImage checks the image surge runs from: its user, command, binaries and size.
func TestImage(t *testing.T) {
	image := os.Getenv("SURGE_IMAGE")
	if image == "" {
		image = "surge"
	}
	start := time.Now()
	files, archiveSize := exportImage(t, image)
	cfgJSON, layers := configAndLayers(t, files)
	var cfg imageConfig
	if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	size := unpack(t, layers, root)
	t.Logf("image %s: %d layers, %.1f MB of files, %.1f MB exported (%s/%s), read in %v",
		image, len(layers), float64(size)/1e6, float64(archiveSize)/1e6, cfg.OS, cfg.Architecture, time.Since(start).Round(time.Millisecond))
	if size > maxImageBytes {
		t.Errorf("the image holds %.1f MB, over the %d MB bound", float64(size)/1e6, maxImageBytes>>20)
	}

	// The user: numeric (a runtime can check non-root without reading /etc/passwd), not root,
	// and named in the image's passwd.
	uid, gid, ok := strings.Cut(cfg.Config.User, ":")
	if cfg.Config.User == "" || uid == "0" || uid == "root" || strings.Trim(uid, "0123456789") != "" {
		t.Fatalf("image user %q: want a numeric non-root uid", cfg.Config.User)
	}
	if !ok {
		gid = uid
	}
	passwd, err := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	if err != nil {
		t.Fatalf("no /etc/passwd in the image: %v", err)
	}
	if !slices.ContainsFunc(strings.Split(string(passwd), "\n"), func(l string) bool {
		f := strings.Split(l, ":")
		return len(f) == 7 && f[2] == uid && f[3] == gid
	}) {
		t.Errorf("/etc/passwd has no entry for %s:%s", uid, gid)
	}
	if ca, err := os.ReadFile(filepath.Join(root, "etc", "ssl", "certs", "ca-certificates.crt")); err != nil ||
		!bytes.Contains(ca, []byte("BEGIN CERTIFICATE")) {
		t.Errorf("no CA certificates at /etc/ssl/certs/ca-certificates.crt (%v)", err)
	}

	// The command: a service named by its binary, found through PATH; the default serves the
	// gateway.
	if len(cfg.Config.Entrypoint) != 0 {
		t.Errorf("entrypoint %q: want none, so that the command names the service", cfg.Config.Entrypoint)
	}
	if !slices.Equal(cfg.Config.Cmd, []string{"gateway"}) {
		t.Errorf("default command %q, want [gateway]", cfg.Config.Cmd)
	}
	if !slices.Contains(cfg.Config.Env, "PATH=/usr/local/bin") {
		t.Errorf("env %q: want PATH=/usr/local/bin", cfg.Config.Env)
	}
	for _, p := range []string{"8080/tcp", "9101/tcp", "9102/tcp", "9121/tcp"} {
		if _, ok := cfg.Config.ExposedPorts[p]; !ok {
			t.Errorf("port %s is not exposed", p)
		}
	}
	t.Logf("user %s, entrypoint %q, command %q, env %q", cfg.Config.User, cfg.Config.Entrypoint, cfg.Config.Cmd, cfg.Config.Env)

	for _, bin := range append(slices.Clone(imageBinaries), "healthcheck") {
		t.Run(bin, func(t *testing.T) {
			file := filepath.Join(root, "usr", "local", "bin", bin)
			checkStatic(t, file)
			out := runInImage(t, root, uid, gid, bin)
			t.Logf("%s: %s", bin, firstLine(out))
		})
	}

	// The probe answers for a ready and an unready service.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	if code := probeInImage(t, root, uid, gid, srv.URL+"/readyz"); code != 0 {
		t.Errorf("healthcheck of a ready service: exit %d, want 0", code)
	}
	if code := probeInImage(t, root, uid, gid, srv.URL+"/other"); code != 1 {
		t.Errorf("healthcheck of a service answering 503: exit %d, want 1", code)
	}
}

// probeInImage runs the image's healthcheck against a server of the test, as a health check
// runs it inside a container, and returns its exit code.
func probeInImage(t *testing.T, root, uid, gid, url string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/usr/local/bin/healthcheck", url)
	cmd.Env = []string{"PATH=/usr/local/bin"}
	if os.Geteuid() == 0 {
		var u, g uint32
		fmt.Sscan(uid, &u)
		fmt.Sscan(gid, &g)
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: u, Gid: g}}
		cmd.Dir = "/"
	} else {
		cmd.Path = filepath.Join(root, "usr", "local", "bin", "healthcheck")
	}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return ee.ExitCode()
	}
	t.Fatalf("healthcheck %s did not run: %v\n%s", url, err, out)
	return -1
}

// checkStatic: no program interpreter, no shared library, built with CGO_ENABLED=0.
func checkStatic(t *testing.T, file string) {
	t.Helper()
	f, err := elf.Open(file)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked (PT_INTERP)", file)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s needs %v", file, libs)
	}
	bi, err := buildinfo.ReadFile(file)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	for _, s := range bi.Settings {
		if s.Key == "CGO_ENABLED" && s.Value != "0" {
			t.Errorf("%s was built with CGO_ENABLED=%s", file, s.Value)
		}
	}
}

// runInImage runs BIN --version, else BIN help, inside the image's file system with only
// the image's environment, and returns what it printed. It passes when the program exits 0,
// or (gateway and worker have neither command yet) when it answers as itself: exit 1 and
// "BIN: unknown command" from its own main, after reading its configuration.
func runInImage(t *testing.T, root, uid, gid, bin string) string {
	t.Helper()
	var last string
	for _, arg := range []string{"--version", "help"} {
		if bin == "healthcheck" && arg == "--version" {
			continue // its arguments are a URL, or help
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cmd := exec.CommandContext(ctx, "/usr/local/bin/"+bin, arg)
		cmd.Env = []string{"PATH=/usr/local/bin"}
		if os.Geteuid() == 0 {
			var u, g uint32
			fmt.Sscan(uid, &u)
			fmt.Sscan(gid, &g)
			cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: u, Gid: g}}
			cmd.Dir = "/"
		} else {
			cmd.Path = filepath.Join(root, "usr", "local", "bin", bin)
		}
		out, err := cmd.CombinedOutput()
		cancel()
		var ee *exec.ExitError
		switch {
		case err == nil && len(bytes.TrimSpace(out)) > 0:
			return fmt.Sprintf("%s %s: %s", bin, arg, out)
		case errors.As(err, &ee) && ee.ExitCode() >= 0:
			last = fmt.Sprintf("%s %s: exit %d: %s", bin, arg, ee.ExitCode(), out)
			if arg == "help" && ee.ExitCode() == 1 && strings.HasPrefix(string(out), bin+": unknown command") {
				return last
			}
		default:
			t.Fatalf("%s %s did not run in the image: %v\n%s", bin, arg, err, out)
		}
	}
	t.Fatalf("%s answers neither --version nor help: %s", bin, last)
	return ""
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
