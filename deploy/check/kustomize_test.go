package check

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// readRepoFile returns a file of the repository as text.
func readRepoFile(t *testing.T, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// operatorCopy copies deploy/kubernetes into a temporary directory and, unless bare, writes
// the secrets/ env files there as kustomization.yaml tells an operator to.
func operatorCopy(t *testing.T, bare bool) string {
	t.Helper()
	dir := t.TempDir()
	files, err := filepath.Glob(filepath.Join(k8sDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if bare {
		return dir
	}
	if err := os.Mkdir(filepath.Join(dir, "secrets"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, user := range engineUsers {
		pw := randomHex(t, 24)
		env := fmt.Sprintf("SURGE_REDIS_USER=%s\nSURGE_REDIS_PASSWORD=%s\nSURGE_AMQP_URL=amqp://%s:%s@rabbitmq.example.internal:5672/\n",
			user, pw, user, pw)
		if user != "surge-exporter" {
			env += fmt.Sprintf("SURGE_MYSQL_DSN=%s:%s@tcp(mariadb.example.internal:3306)/surge\n", user, pw)
		}
		if user == "surge-gateway" {
			env += "SURGE_ADMIN_TOKEN=" + randomHex(t, 32) + "\n"
		}
		if err := os.WriteFile(filepath.Join(dir, "secrets", user+".env"), []byte(env), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func kustomize(dir string) ([]byte, error) {
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, err
	}
	return resMap.AsYaml()
}

// TestKustomizeBuild renders deploy/kubernetes as `kubectl apply -k` does (kustomize's own
// library), with the secrets/ files an operator writes, then decodes the output strictly like
// the sources: every object lands in the namespace surge and runs the image
// kustomization.yaml names, each engine user's Secret is generated (name with a content
// hash) and every reference to it follows that name.
func TestKustomizeBuild(t *testing.T) {
	out, err := kustomize(operatorCopy(t, false))
	if err != nil {
		t.Fatalf("kustomize build deploy/kubernetes: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rendered.yaml"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	m := loadManifests(t, dir)
	if got, want := len(m.all), len(loadManifests(t, k8sDir).all)+len(engineUsers); got != want {
		t.Errorf("kustomize rendered %d objects, want the files' and one Secret per engine user: %d", got, want)
	}
	for _, o := range m.all {
		if _, isNS := o.(*corev1.Namespace); !isNS && o.GetNamespace() != "surge" {
			t.Errorf("%s: namespace %q, want surge", o.GetName(), o.GetNamespace())
		}
		if o.GetLabels()["app.kubernetes.io/part-of"] != "surge" {
			t.Errorf("%s: no label app.kubernetes.io/part-of=surge", o.GetName())
		}
	}
	generated := map[string]*corev1.Secret{}
	for _, s := range m.secrets {
		base := s.Name[:max(strings.LastIndex(s.Name, "-"), 0)]
		generated[base] = s
		if s.Data["SURGE_REDIS_USER"] == nil || string(s.Data["SURGE_REDIS_USER"]) != base {
			t.Errorf("Secret %s: SURGE_REDIS_USER %q, want %s", s.Name, s.Data["SURGE_REDIS_USER"], base)
		}
	}
	for _, u := range engineUsers {
		if generated[u] == nil {
			t.Errorf("no Secret generated for %s", u)
		}
	}
	refs := 0
	for _, d := range m.deployments {
		spec := d.Spec.Template.Spec
		if img := spec.Containers[0].Image; !strings.HasPrefix(img, "surge:") {
			t.Errorf("Deployment %s: rendered image %q, want kustomization.yaml's surge:TAG", d.Name, img)
		}
		for _, c := range append(spec.InitContainers, spec.Containers...) {
			for _, e := range c.EnvFrom {
				if e.SecretRef != nil {
					refs++
					checkGeneratedRef(t, d.Name, e.SecretRef.Name, generated)
				}
			}
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					refs++
					checkGeneratedRef(t, d.Name, e.ValueFrom.SecretKeyRef.Name, generated)
				}
			}
		}
	}
	if refs == 0 {
		t.Error("no Deployment reads a Secret")
	}
	if len(m.cronJobs) != 1 || !strings.HasPrefix(m.cronJobs[0].Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image, "surge:") {
		t.Error("the CronJob's image is not retagged")
	}
}

func checkGeneratedRef(t *testing.T, where, name string, generated map[string]*corev1.Secret) {
	t.Helper()
	for _, s := range generated {
		if s.Name == name {
			return
		}
	}
	t.Errorf("Deployment %s reads Secret %s, which kustomize did not generate (the hash suffix was not followed)", where, name)
}

// TestKustomizeBuildNeedsSecrets: without the operator's secrets/ files nothing renders, and
// the error names the file to write, so no placeholder credential can reach a cluster.
func TestKustomizeBuildNeedsSecrets(t *testing.T) {
	_, err := kustomize(operatorCopy(t, true))
	if err == nil || !strings.Contains(err.Error(), "secrets/surge-") {
		t.Fatalf("kustomize build without secrets/: %v, want an error naming the missing file", err)
	}
}
