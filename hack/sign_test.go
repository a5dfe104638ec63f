// Package hack_test tests what make release runs that can be run without a
// cluster: hack/sign.sh, the signatures and SBOMs of a release, against a real
// registry (Debian's docker-registry, the distribution registry the e2e node
// runs) with the cosign and syft that make release builds (COSIGN and SYFT;
// `make test` passes them).
package hack_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The package the test image's dpkg database lists: its SBOM must name it.
const fixturePackage, fixtureVersion = "uring-signing-fixture", "1.2.3-1"

// TestSignedReleaseVerifies signs an image and a chart-like artifact as make
// release does and verifies them as docs/releases.md tells a user to: with the
// release's public key the signatures and the image's SPDX SBOM attestation
// verify, and the SBOM lists the image's Debian package; with another key, or
// for an image the release did not sign, verification fails.
func TestSignedReleaseVerifies(t *testing.T) {
	cosign, syft, crane := tool(t, "COSIGN"), tool(t, "SYFT"), tool(t, "CRANE")
	registry := startRegistry(t)
	image := push(t, registry, "fixture/server", imageManifest(t, registry, "fixture/server"))
	chart := push(t, registry, "charts/fixture", chartManifest(t, registry, "charts/fixture"))
	unsigned := push(t, registry, "fixture/unsigned", imageManifest(t, registry, "fixture/unsigned"))
	// A multi-arch image is an OCI index; a node pulls its platform's image by
	// that image's own digest, which must verify too.
	platformImage := imageManifest(t, registry, "fixture/multiarch")
	platformRef := push(t, registry, "fixture/multiarch", platformImage)
	multiarch := pushIndex(t, registry, "fixture/multiarch", platformImage)

	dir := t.TempDir()
	key := generateKeyPair(t, cosign, filepath.Join(dir, "release"), "release password")
	dist := filepath.Join(dir, "dist")
	sign := exec.Command("./sign.sh", dist, image, multiarch, "--", chart)
	sign.Env = append(os.Environ(), "COSIGN="+cosign, "SYFT="+syft, "CRANE="+crane, "COSIGN_KEY="+key+".key", "COSIGN_PASSWORD=release password")
	if out, err := sign.CombinedOutput(); err != nil {
		t.Fatalf("hack/sign.sh: %v\n%s", err, out)
	}

	pub := filepath.Join(dist, "cosign.pub")
	if got, want := readFile(t, pub), readFile(t, key+".pub"); got != want {
		t.Errorf("dist/cosign.pub is\n%s\nwant the release key's public half\n%s", got, want)
	}
	// The index's platform image by its own digest, as a node pulls it.
	platformByDigest := strings.SplitN(multiarch, "@", 2)[0] + "@" + strings.SplitN(platformRef, "@", 2)[1]
	if got, want := readFile(t, filepath.Join(dist, "artifacts.txt")), image+"\n"+multiarch+"\n"+platformByDigest+"\n"+chart+"\n"; got != want {
		t.Errorf("dist/artifacts.txt is\n%s\nwant\n%s", got, want)
	}
	checkSBOM(t, "dist/sbom/server.spdx.json", readSBOM(t, filepath.Join(dist, "sbom", "server.spdx.json")))

	for _, ref := range []string{image, multiarch, platformRef, chart} {
		if out, err := verify(cosign, pub, ref); err != nil {
			t.Errorf("cosign verify --key dist/cosign.pub %s: %v\n%s", ref, err, out)
		}
	}
	checkSBOM(t, "dist/sbom/multiarch-linux-amd64.spdx.json", readSBOM(t, filepath.Join(dist, "sbom", "multiarch-linux-amd64.spdx.json")))
	for _, ref := range []string{image, multiarch, platformByDigest} {
		out, err := verifyAttestation(cosign, pub, ref)
		if err != nil {
			t.Fatalf("cosign verify-attestation --type spdxjson --key dist/cosign.pub %s: %v\n%s", ref, err, out)
		}
		checkSBOM(t, "the verified attestation's predicate of "+ref, attestedSBOM(t, out))
	}

	wrong := generateKeyPair(t, cosign, filepath.Join(dir, "other"), "") + ".pub"
	for _, ref := range []string{image, chart} {
		if out, err := verify(cosign, wrong, ref); err == nil {
			t.Errorf("cosign verify with a key that is not the release's accepted %s:\n%s", ref, out)
		}
	}
	if out, err := verifyAttestation(cosign, wrong, image); err == nil {
		t.Errorf("cosign verify-attestation with a key that is not the release's accepted %s:\n%s", image, out)
	}
	if out, err := verify(cosign, pub, unsigned); err == nil {
		t.Errorf("cosign verify accepted %s, which the release did not sign:\n%s", unsigned, out)
	}
}

func readSBOM(t *testing.T, path string) spdxDocument {
	t.Helper()
	var sbom spdxDocument
	if err := json.Unmarshal([]byte(readFile(t, path)), &sbom); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return sbom
}

// TestSignRefusesAKeyWithoutItsPassword: with COSIGN_KEY set and no
// COSIGN_PASSWORD, cosign would wait for a terminal; the script says so instead.
func TestSignRefusesAKeyWithoutItsPassword(t *testing.T) {
	sign := exec.Command("./sign.sh", t.TempDir(), "localhost:5000/x@sha256:"+strings.Repeat("0", 64))
	sign.Env = append(slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "COSIGN_PASSWORD=") }),
		"COSIGN=cosign", "SYFT=syft", "CRANE=crane", "COSIGN_KEY=release.key")
	out, err := sign.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "COSIGN_PASSWORD is not") {
		t.Errorf("hack/sign.sh with COSIGN_KEY and no COSIGN_PASSWORD: %v\n%s", err, out)
	}
}

func tool(t *testing.T, env string) string {
	t.Helper()
	path := os.Getenv(env)
	if path == "" {
		t.Fatalf("%s is not set: run the tests with `make test`, which builds the pinned cosign and syft make release signs with", env)
	}
	return path
}

// startRegistry runs Debian's docker-registry on a free loopback port with its
// storage in a temporary directory, and returns its host:port.
func startRegistry(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("DOCKER_REGISTRY")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("docker-registry"); err != nil {
			t.Fatal("no docker-registry on the PATH: `make test` installs Debian's (e2e/cluster/host-deps.sh docker-registry); or set DOCKER_REGISTRY")
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	dir := t.TempDir()
	config := filepath.Join(dir, "registry.yml")
	writeFile(t, config, fmt.Sprintf("version: 0.1\nlog: {level: warn}\nstorage:\n  filesystem: {rootdirectory: %s}\nhttp:\n  addr: %s\n", filepath.Join(dir, "data"), addr))
	var logs bytes.Buffer
	cmd := exec.Command(bin, "serve", config)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/v2/"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("docker-registry on %s did not answer in 30s:\n%s", addr, logs.String())
		}
	}
}

// descriptor is an OCI content descriptor.
type descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int    `json:"size"`
}

// imageManifest uploads the blobs of a one-layer linux/amd64 image whose
// dpkg database lists fixturePackage, and returns its OCI manifest.
func imageManifest(t *testing.T, registry, repository string) []byte {
	t.Helper()
	status := fmt.Sprintf("Package: %s\nStatus: install ok installed\nPriority: optional\nSection: misc\nInstalled-Size: 1\n"+
		"Maintainer: uring-redis <uring-redis@example.invalid>\nArchitecture: amd64\nVersion: %s\n"+
		"Description: a package only the signing test's image lists\n", fixturePackage, fixtureVersion)
	osRelease := "PRETTY_NAME=\"Debian GNU/Linux 13 (trixie)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"13\"\nID=debian\n"
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	for _, f := range []struct{ name, content string }{{"etc/os-release", osRelease}, {"var/lib/dpkg/status", status}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f.content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(layer.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux", "config": map[string]any{},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{digest(layer.Bytes())}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return manifest(t,
		upload(t, registry, repository, "application/vnd.oci.image.config.v1+json", config),
		upload(t, registry, repository, "application/vnd.oci.image.layer.v1.tar+gzip", gz.Bytes()))
}

// chartManifest uploads the blobs of an artifact with Helm's media types, as
// helm push makes one, and returns its OCI manifest.
func chartManifest(t *testing.T, registry, repository string) []byte {
	t.Helper()
	return manifest(t,
		upload(t, registry, repository, "application/vnd.cncf.helm.config.v1+json", []byte(`{"name":"fixture","version":"0.1.0","apiVersion":"v2"}`)),
		upload(t, registry, repository, "application/vnd.cncf.helm.chart.content.v1.tar+gzip", []byte("not a chart: only its digest is signed")))
}

func manifest(t *testing.T, config descriptor, layers ...descriptor) []byte {
	t.Helper()
	m, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json", "config": config, "layers": layers,
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// upload puts a blob into repository with the distribution API's monolithic upload.
func upload(t *testing.T, registry, repository, mediaType string, blob []byte) descriptor {
	t.Helper()
	d := descriptor{MediaType: mediaType, Digest: digest(blob), Size: len(blob)}
	resp, err := http.Post("http://"+registry+"/v2/"+repository+"/blobs/uploads/", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	location, err := resp.Location()
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("starting an upload to %s: %s, %v", repository, resp.Status, err)
	}
	q := location.Query()
	q.Set("digest", d.Digest)
	location.RawQuery = q.Encode()
	do(t, http.MethodPut, location.String(), "application/octet-stream", blob, http.StatusCreated)
	return d
}

// push puts a manifest into repository, tagged 1.0, and returns its reference
// by tag and digest, the way make release names the images it signs.
func push(t *testing.T, registry, repository string, m []byte) string {
	t.Helper()
	do(t, http.MethodPut, "http://"+registry+"/v2/"+repository+"/manifests/1.0", "application/vnd.oci.image.manifest.v1+json", m, http.StatusCreated)
	return registry + "/" + repository + ":1.0@" + digest(m)
}

// pushIndex puts an OCI index of one linux/amd64 image, the manifest m
// already pushed, into repository, tagged 1.0-multiarch, and returns its
// reference by tag and digest.
func pushIndex(t *testing.T, registry, repository string, m []byte) string {
	t.Helper()
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
		"manifests": []map[string]any{{
			"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest(m), "size": len(m),
			"platform": map[string]string{"architecture": "amd64", "os": "linux"},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	do(t, http.MethodPut, "http://"+registry+"/v2/"+repository+"/manifests/1.0-multiarch", "application/vnd.oci.image.index.v1+json", index, http.StatusCreated)
	return registry + "/" + repository + ":1.0-multiarch@" + digest(index)
}

func do(t *testing.T, method, url, contentType string, body []byte, want int) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != want {
		var msg bytes.Buffer
		_, _ = msg.ReadFrom(resp.Body)
		t.Fatalf("%s %s: %s, want %d: %s", method, url, resp.Status, want, msg.String())
	}
}

func digest(b []byte) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(b)) }

// generateKeyPair makes prefix.key and prefix.pub with cosign, and returns prefix.
func generateKeyPair(t *testing.T, cosign, prefix, password string) string {
	t.Helper()
	cmd := exec.Command(cosign, "generate-key-pair", "--output-key-prefix", prefix)
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD="+password)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	return prefix
}

// verify and verifyAttestation run what docs/releases.md tells a user to run
// for a release in a registry on localhost, and return what cosign printed on
// its standard output; an error carries what it printed on its standard error.
func verify(cosign, pub, ref string) ([]byte, error) {
	return output(exec.Command(cosign, "verify", "--key", pub, "--insecure-ignore-tlog", "--allow-http-registry", ref))
}

func verifyAttestation(cosign, pub, ref string) ([]byte, error) {
	return output(exec.Command(cosign, "verify-attestation", "--key", pub, "--type", "spdxjson", "--insecure-ignore-tlog", "--allow-http-registry", ref))
}

func output(cmd *exec.Cmd) ([]byte, error) {
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(exit.Stderr))
	}
	return out, err
}

// spdxDocument is what the test reads of an SPDX 2.3 JSON document.
type spdxDocument struct {
	SPDXVersion string `json:"spdxVersion"`
	Packages    []struct {
		Name        string `json:"name"`
		VersionInfo string `json:"versionInfo"`
	} `json:"packages"`
}

// attestedSBOM is the SPDX document of the in-toto statement that cosign
// verify-attestation printed (a DSSE envelope a line).
func attestedSBOM(t *testing.T, out []byte) spdxDocument {
	t.Helper()
	var envelope struct {
		PayloadType string `json:"payloadType"`
		Payload     string `json:"payload"`
	}
	line, _, _ := bytes.Cut(bytes.TrimSpace(out), []byte("\n"))
	if err := json.Unmarshal(line, &envelope); err != nil {
		t.Fatalf("cosign verify-attestation printed %q: %v", out, err)
	}
	payload, err := base64.StdEncoding.DecodeString(envelope.Payload)
	if err != nil {
		t.Fatal(err)
	}
	var statement struct {
		PredicateType string       `json:"predicateType"`
		Predicate     spdxDocument `json:"predicate"`
	}
	if err := json.Unmarshal(payload, &statement); err != nil {
		t.Fatalf("the attestation's payload %s: %v", payload, err)
	}
	if statement.PredicateType != "https://spdx.dev/Document" {
		t.Errorf("the attestation's predicate type is %q, want https://spdx.dev/Document", statement.PredicateType)
	}
	return statement.Predicate
}

func checkSBOM(t *testing.T, what string, doc spdxDocument) {
	t.Helper()
	if doc.SPDXVersion != "SPDX-2.3" {
		t.Errorf("%s: spdxVersion %q, want SPDX-2.3", what, doc.SPDXVersion)
	}
	for _, p := range doc.Packages {
		if p.Name == fixturePackage && p.VersionInfo == fixtureVersion {
			return
		}
	}
	t.Errorf("%s lists no %s %s, the package the image's dpkg database has: %+v", what, fixturePackage, fixtureVersion, doc.Packages)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
