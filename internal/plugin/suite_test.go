package plugin

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

var (
	env        *testenv.Env
	k8s        client.Client
	kubeconfig string
	update     = flag.Bool("update", false, "rewrite the golden files in testdata/")
)

// testNow is the plugin's clock in every test: ages and backup names are
// counted from it.
var testNow = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

// TestMain runs the commands against a real kube-apiserver with the
// project's CRDs, and no operator: the tests write the statuses the
// operator would, through the status subresource.
func TestMain(m *testing.M) {
	flag.Parse()
	env = testenv.Start(m)
	k8s = env.Client
	kubeconfig = env.Kubeconfig("plugin-user")
	code := m.Run()
	env.Stop(code != 0)
	os.Exit(code)
}

// run runs `kubectl uring args...` in-process with the test's kubeconfig,
// as a user's shell would, and returns what it printed.
func run(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return runAt(t, testNow, args...)
}

func runAt(t *testing.T, now time.Time, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := NewCommand(Env{
		IOStreams:    genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut},
		Clock:        clocktesting.NewFakePassiveClock(now),
		PollInterval: 50 * time.Millisecond,
	})
	cmd.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// namespace creates a namespace of its own for the test.
func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "plugin-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// create creates rp and writes status as its status.
func create(t *testing.T, rp *v1alpha1.RedisPersistence, status v1alpha1.RedisPersistenceStatus) {
	t.Helper()
	ctx := context.Background()
	if err := k8s.Create(ctx, rp); err != nil {
		t.Fatal(err)
	}
	rp.Status = status
	if err := k8s.Status().Update(ctx, rp); err != nil {
		t.Fatal(err)
	}
}

// createBackupWithStatus creates a RedisBackup of instance and writes status.
func createBackupWithStatus(t *testing.T, namespace, name, instance string, status v1alpha1.RedisBackupStatus) {
	t.Helper()
	ctx := context.Background()
	b := &v1alpha1.RedisBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       v1alpha1.RedisBackupSpec{RedisPersistence: v1alpha1.LocalObjectReference{Name: instance}},
	}
	if err := k8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	setBackupStatus(t, b, status)
}

func setBackupStatus(t *testing.T, b *v1alpha1.RedisBackup, status v1alpha1.RedisBackupStatus) {
	t.Helper()
	b.Status = status
	if err := k8s.Status().Update(context.Background(), b); err != nil {
		t.Fatal(err)
	}
}

// destination is a store the API server accepts; nothing listens there,
// and no test needs it to.
func destination() *v1alpha1.BackupSpec {
	return &v1alpha1.BackupSpec{Destination: v1alpha1.BackupDestination{S3: v1alpha1.S3Destination{
		Endpoint:    "http://store.storage.svc:9000",
		Bucket:      "backups",
		Credentials: v1alpha1.S3Credentials{SecretName: "store"},
	}}}
}

func at(d time.Duration) *metav1.Time {
	t := metav1.NewTime(testNow.Add(d))
	return &t
}

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// golden compares got with testdata/<name>, or writes it there with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
