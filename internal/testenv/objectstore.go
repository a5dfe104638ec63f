package testenv

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"k8s.io/apimachinery/pkg/util/wait"
)

// ObjectStore is a running SeaweedFS serving S3 on a loopback port: master,
// volume server, filer and S3 gateway in one `weed server` process, with one
// identity allowed everything (AccessKey), the Identities it was started
// with, and one bucket.
type ObjectStore struct {
	Endpoint  string // http://127.0.0.1:<port>, or https:// with StartObjectStoreTLS
	AccessKey string
	SecretKey string
	Bucket    string
	Region    string
	// CA is the PEM of the CA that signed the endpoint's certificate, with
	// StartObjectStoreTLS.
	CA []byte

	cmd         *exec.Cmd
	exited      chan error
	log         string
	grpcSockets []string
}

// SeaweedFSBin is $SEAWEEDFS_BIN, else the weed hack/seaweedfs.sh builds at
// the version e2e/images/seaweedfs/go.mod pins; "" when neither exists.
func SeaweedFSBin() string {
	if bin := os.Getenv("SEAWEEDFS_BIN"); bin != "" {
		return bin
	}
	goMod, err := os.ReadFile(filepath.Join(RepoRoot(), "e2e", "images", "seaweedfs", "go.mod"))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(goMod), "\n") {
		if fields := strings.Fields(line); len(fields) == 3 && fields[0] == "require" && fields[1] == "github.com/seaweedfs/seaweedfs" {
			bin := filepath.Join(RepoRoot(), "bin", "seaweedfs", fields[2], "weed")
			if _, err := os.Stat(bin); err == nil {
				return bin
			}
		}
	}
	return ""
}

// Identity is one more access key of an ObjectStore, allowed what its IAM
// policy document allows and nothing else, as an AWS user with that policy
// would be: SeaweedFS evaluates the policy (actions, resources, conditions
// such as s3:prefix) with its own policy engine.
type Identity struct {
	AccessKey, SecretKey string
	// Policy is the JSON of an IAM policy document.
	Policy string
}

// StartObjectStore runs SeaweedFS with S3 over plain HTTP in a temporary
// directory and stops it when the test ends. Without a weed binary the test
// is skipped, or fails when $CI is set.
func StartObjectStore(t *testing.T) *ObjectStore {
	t.Helper()
	return startObjectStore(t, nil, nil)
}

// StartObjectStoreWithIdentities is StartObjectStore with an access key for
// each of identities besides the one allowed everything.
func StartObjectStoreWithIdentities(t *testing.T, identities ...Identity) *ObjectStore {
	t.Helper()
	return startObjectStore(t, nil, identities)
}

// StartObjectStoreTLS is StartObjectStore with S3 over HTTPS only, its
// certificate (for 127.0.0.1 and localhost) issued by ca.
func StartObjectStoreTLS(t *testing.T, ca *CA) *ObjectStore {
	t.Helper()
	return startObjectStore(t, ca, nil)
}

func startObjectStore(t *testing.T, ca *CA, identities []Identity) *ObjectStore {
	t.Helper()
	bin := SeaweedFSBin()
	if _, err := os.Stat(bin); bin != "" && err != nil {
		t.Fatalf("the SeaweedFS binary: %v", err)
	}
	if bin == "" {
		msg := "no SeaweedFS weed binary: run hack/seaweedfs.sh (`make test` does) or set SEAWEEDFS_BIN"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	s := &ObjectStore{
		AccessKey: "backup-test",
		SecretKey: "backup-test-secret",
		Bucket:    "backups",
		Region:    "us-east-1",
		log:       filepath.Join(dir, "weed.log"),
	}
	users := []map[string]any{{
		"name":        "backup-test",
		"credentials": []map[string]string{{"accessKey": s.AccessKey, "secretKey": s.SecretKey}},
		"actions":     []string{"Admin", "Read", "List", "Tagging", "Write"},
	}}
	policies := []map[string]string{}
	for _, id := range identities {
		users = append(users, map[string]any{
			"name":        id.AccessKey,
			"credentials": []map[string]string{{"accessKey": id.AccessKey, "secretKey": id.SecretKey}},
			"policyNames": []string{id.AccessKey},
		})
		policies = append(policies, map[string]string{"name": id.AccessKey, "content": id.Policy})
	}
	config, err := json.Marshal(map[string]any{"identities": users, "policies": policies})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "s3.json"), config, 0o600); err != nil {
		t.Fatal(err)
	}

	var tlsArgs []string
	if ca != nil {
		certPEM, keyPEM := ca.Issue(t, 24*time.Hour, "localhost")
		certFile, keyFile := filepath.Join(dir, "s3.crt"), filepath.Join(dir, "s3.key")
		if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		tlsArgs = []string{"-s3.cert.file=" + certFile, "-s3.key.file=" + keyFile}
		s.CA = ca.PEM
	}
	// The ports are free when chosen, not when weed binds them a second
	// later: another process of the machine's may take one first. weed
	// then exits, and starts again on others.
	for attempt := 1; ; attempt++ {
		err := s.launch(t, bin, dir, tlsArgs)
		if err == nil {
			return s
		}
		out, _ := os.ReadFile(s.log)
		if attempt < 3 && bytes.Contains(out, []byte("address already in use")) {
			t.Logf("SeaweedFS found a port it was given taken (%v); starting it again on others", err)
			s.Stop()
			continue
		}
		t.Fatalf("%v\nSeaweedFS log:\n%s", err, out)
	}
}

// launch starts weed on free ports with tlsArgs for S3 and creates the
// bucket.
func (s *ObjectStore) launch(t *testing.T, bin, dir string, tlsArgs []string) error {
	t.Helper()
	// Every listener gets its own free port: weed would otherwise put each
	// gRPC port 10000 above its HTTP port, where another test may listen.
	ports := choosePorts(t, 8)
	s3Port := ports[6]
	// Each start on a directory of its own: a master keeps its peers'
	// addresses in its raft state.
	run, err := os.MkdirTemp(dir, "run")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(run, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	s.grpcSockets = nil
	for i, component := range []string{"master", "volume", "filer", "s3"} {
		s.grpcSockets = append(s.grpcSockets, fmt.Sprintf("/tmp/seaweedfs-%s-grpc-%s.sock", component, ports[2*i+1]))
	}
	args := []string{
		"-logtostderr", "server",
		"-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-dir=" + filepath.Join(run, "data"),
		"-master.port=" + ports[0], "-master.port.grpc=" + ports[1],
		"-volume.port=" + ports[2], "-volume.port.grpc=" + ports[3],
		"-filer.port=" + ports[4], "-filer.port.grpc=" + ports[5],
		"-s3", "-s3.port=" + s3Port, "-s3.port.grpc=" + ports[7],
		"-s3.port.iceberg=0", "-s3.port.lance=0",
		"-s3.config=" + filepath.Join(dir, "s3.json"),
		"-filer.localSocket=" + filepath.Join(run, "filer.sock"),
		"-s3.localSocket=" + filepath.Join(run, "s3.sock"),
		// Small volumes, few of them, none preallocated: a test writes MiBs.
		"-master.volumeSizeLimitMB=64", "-volume.max=16",
		// The master would report usage to seaweedfs.com.
		"-master.telemetry=false",
	}
	args = append(args, tlsArgs...)
	s.Endpoint = "http://127.0.0.1:" + s3Port
	if len(tlsArgs) > 0 {
		s.Endpoint = "https://127.0.0.1:" + s3Port
	}

	log, err := os.Create(s.log)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = log.Close() }()
	s.cmd = exec.Command(bin, args...)
	// weed reads master.toml, filer.toml, security.toml... from its working
	// directory and $HOME/.seaweedfs first: an empty directory keeps the
	// defaults.
	s.cmd.Dir = dir
	// SSE-S3 (x-amz-server-side-encryption: AES256) needs a key to wrap
	// the objects' keys with.
	s.cmd.Env = append(os.Environ(), "HOME="+dir, "WEED_S3_SSE_KEY=uring-redis test SSE-S3 key")
	s.cmd.Stdout, s.cmd.Stderr = log, log
	s.exited = make(chan error, 1)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := s.exited
	go func() { exited <- s.cmd.Wait() }()
	cmd := s.cmd
	t.Cleanup(func() {
		if s.cmd == cmd {
			s.Stop()
			if t.Failed() {
				logTail(t, "SeaweedFS", s.log)
			}
		}
	})
	return s.createBucket()
}

// createBucket creates the bucket and waits until an object can be written
// into it: the S3 gateway answers about 2 s after the start, but the first
// write waits for the master's first volume allocation and for the filer to
// join the cluster, fixed delays in weed that make the whole start about
// 11 s.
func (s *ObjectStore) createBucket() error {
	transport, err := minio.DefaultTransport(s.CA != nil)
	if err != nil {
		return err
	}
	if s.CA != nil {
		transport.TLSClientConfig.RootCAs = x509.NewCertPool()
		transport.TLSClientConfig.RootCAs.AppendCertsFromPEM(s.CA)
	}
	client, err := minio.New(strings.TrimPrefix(strings.TrimPrefix(s.Endpoint, "http://"), "https://"), &minio.Options{
		Creds:     credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Secure:    s.CA != nil,
		Transport: transport,
		Region:    s.Region,
	})
	if err != nil {
		return err
	}
	const probe = "testenv-probe"
	var lastErr error
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-s.exited:
			s.exited <- err
			if err == nil {
				err = errors.New("exit status 0")
			}
			return false, fmt.Errorf("SeaweedFS exited (%w)", err)
		default:
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		lastErr = client.MakeBucket(ctx, s.Bucket, minio.MakeBucketOptions{Region: s.Region})
		if minio.ToErrorResponse(lastErr).Code == "BucketAlreadyOwnedByYou" {
			lastErr = nil
		}
		if lastErr == nil {
			_, lastErr = client.PutObject(ctx, s.Bucket, probe, strings.NewReader(probe), int64(len(probe)), minio.PutObjectOptions{})
		}
		if lastErr == nil {
			lastErr = client.RemoveObject(ctx, s.Bucket, probe, minio.RemoveObjectOptions{})
		}
		return lastErr == nil, nil
	})
	if wait.Interrupted(err) {
		return fmt.Errorf("SeaweedFS did not take an object into bucket %q at %s within 60 s: %w", s.Bucket, s.Endpoint, lastErr)
	}
	return err
}

// Stop kills SeaweedFS: the endpoint then refuses connections, as an object
// store that is down does. It also removes the unix sockets weed made in
// /tmp for its gRPC ports. Its graceful shutdown would take 15 s, most of it
// the filer trying to flush its metadata log to the volume server that
// stopped first; a test's store holds nothing worth that. Stop is
// idempotent; the test's cleanup calls it too.
func (s *ObjectStore) Stop() {
	_ = s.cmd.Process.Kill()
	err := <-s.exited
	s.exited <- err
	for _, socket := range s.grpcSockets {
		_ = os.Remove(socket)
	}
}

// choosePorts picks the ports weed listens on; a test of the start's retry
// replaces it.
var choosePorts = freePorts

func freePorts(t *testing.T, n int) []string {
	t.Helper()
	ports := make([]string, n)
	// All held open until the last is chosen, so none is chosen twice.
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = l.Close() }()
		ports[i] = strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}
