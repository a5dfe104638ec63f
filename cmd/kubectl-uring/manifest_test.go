package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// krewManifest is what krew reads of plugins/uring.yaml.
type krewManifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version   string `json:"version"`
		Platforms []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Bin    string `json:"bin"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
		} `json:"platforms"`
	} `json:"spec"`
}

// The krew manifest installs `kubectl uring` for linux/amd64 and
// linux/arm64 from the archives `make release-plugin` builds, by the names
// hack/release-plugin.sh gives them, with the fields the script fills in.
func TestKrewManifestNamesTheReleaseArchives(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "plugins", "uring.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m krewManifest
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "uring" || m.Spec.Version != "v{{VERSION}}" {
		t.Errorf("the manifest is %s %s %q version %q, want a krew Plugin uring of version v{{VERSION}}", m.APIVersion, m.Kind, m.Metadata.Name, m.Spec.Version)
	}
	script, err := os.ReadFile(filepath.Join("..", "..", "hack", "release-plugin.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), "archive=kubectl-uring_${version}_linux_${arch}.tar.gz") || !regexp.MustCompile(`for arch in amd64 arm64; do`).Match(script) {
		t.Fatal("hack/release-plugin.sh no longer builds kubectl-uring_${version}_linux_${arch}.tar.gz for amd64 and arm64: update this test and plugins/uring.yaml with it")
	}
	var archs []string
	for _, p := range m.Spec.Platforms {
		arch := p.Selector.MatchLabels["arch"]
		archs = append(archs, p.Selector.MatchLabels["os"]+"/"+arch)
		want := "{{PLUGIN_URL}}/kubectl-uring_{{VERSION}}_linux_" + arch + ".tar.gz"
		if p.URI != want || p.SHA256 != "{{SHA256_LINUX_"+strings.ToUpper(arch)+"}}" || p.Bin != "kubectl-uring" {
			t.Errorf("%s: uri %q sha256 %q bin %q, want uri %q, its SHA-256 field and bin kubectl-uring", arch, p.URI, p.SHA256, p.Bin, want)
		}
		if len(p.Files) != 1 || p.Files[0].From != "kubectl-uring" || p.Files[0].To != "." {
			t.Errorf("%s: files %+v, want kubectl-uring to .", arch, p.Files)
		}
	}
	if strings.Join(archs, " ") != "linux/amd64 linux/arm64" {
		t.Errorf("the manifest's platforms are %v, want linux/amd64 and linux/arm64", archs)
	}
}
