package check

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// TestKustomizeBuild renders deploy/kubernetes as `kubectl apply -k` does (kustomize's own
// library), then decodes the output strictly like the sources: every object lands in the
// namespace surge and runs the image kustomization.yaml names.
func TestKustomizeBuild(t *testing.T) {
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), mustAbs(t, k8sDir))
	if err != nil {
		t.Fatalf("kustomize build deploy/kubernetes: %v", err)
	}
	out, err := resMap.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rendered.yaml"), out, 0o644); err != nil {
		t.Fatal(err)
	}
	m := loadManifests(t, dir)
	if got, want := len(m.all), len(loadManifests(t, k8sDir).all); got != want {
		t.Errorf("kustomize rendered %d objects, the files hold %d", got, want)
	}
	for _, o := range m.all {
		if _, isNS := o.(*corev1.Namespace); !isNS && o.GetNamespace() != "surge" {
			t.Errorf("%s: namespace %q, want surge", o.GetName(), o.GetNamespace())
		}
	}
	for _, d := range m.deployments {
		if img := d.Spec.Template.Spec.Containers[0].Image; !strings.HasPrefix(img, "surge:") {
			t.Errorf("Deployment %s: rendered image %q, want kustomization.yaml's surge:TAG", d.Name, img)
		}
	}
	if len(m.cronJobs) != 1 || !strings.HasPrefix(m.cronJobs[0].Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image, "surge:") {
		t.Error("the CronJob's image is not retagged")
	}
}
