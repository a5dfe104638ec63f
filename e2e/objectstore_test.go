//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The suite's S3 endpoint: SeaweedFS (e2e/images/seaweedfs, built and imported
// into the node by `make e2e-up`) in a namespace of its own, started by the
// first test that needs it and removed with the suite's namespaces.
const (
	storeImage     = "seaweedfs:e2e"
	storeName      = "seaweedfs"
	storePort      = 8333
	storeBucket    = "backups"
	storeRegion    = "us-east-1"
	storeAccessKey = "e2e-backup"
	storeSecretKey = "e2e-backup-secret"
)

// storeNamespace is the object store's namespace once it was started, ""
// before; TestMain deletes it.
var storeNamespace string

var store struct {
	sync.Mutex
	started  bool
	endpoint string
}

// objectStore starts the object store on first use and returns its
// endpoint as a pod in the cluster reaches it.
func objectStore(t *testing.T) string {
	t.Helper()
	store.Lock()
	defer store.Unlock()
	if store.started {
		if store.endpoint == "" {
			t.Fatal("the object store failed to start in an earlier test")
		}
		return store.endpoint
	}
	store.started = true
	start := time.Now()
	storeNamespace = namespace + "-store"
	deployObjectStore(t, storeNamespace)
	createBucket(t)
	store.endpoint = fmt.Sprintf("http://%s.%s.svc:%d", storeName, storeNamespace, storePort)
	t.Logf("the object store %s with bucket %s started in %s", store.endpoint, storeBucket, time.Since(start).Round(time.Second))
	return store.endpoint
}

// deployObjectStore runs one all-in-one `weed server -s3` (master, volume
// server, filer, S3 gateway) on an emptyDir, behind a Service on the S3
// port, with one identity allowed everything, from a Secret.
func deployObjectStore(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	identities, err := json.Marshal(map[string]any{"identities": []map[string]any{{
		"name":        storeAccessKey,
		"credentials": []map[string]string{{"accessKey": storeAccessKey, "secretKey": storeSecretKey}},
		"actions":     []string{"Admin", "Read", "List", "Tagging", "Write"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app.kubernetes.io/name": storeName}
	objects := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: restrictedLabels}},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: storeName + "-s3", Namespace: ns},
			Data:       map[string][]byte{"s3.json": identities},
		},
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: storeName, Namespace: ns},
			Spec: corev1.ServiceSpec{
				Selector: labels,
				Ports:    []corev1.ServicePort{{Name: "s3", Port: storePort, TargetPort: intstr.FromInt32(storePort)}},
			},
		},
		&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: storeName, Namespace: ns, Labels: labels},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{
					Name:            "weed",
					Image:           storeImage,
					ImagePullPolicy: corev1.PullNever,
					Args: []string{
						"-logtostderr", "server",
						// Every component reaches the others inside the pod;
						// clients reach only the S3 gateway, through the Service.
						"-ip=127.0.0.1", "-ip.bind=0.0.0.0", "-dir=/data",
						"-s3", fmt.Sprintf("-s3.port=%d", storePort), "-s3.config=/etc/seaweedfs/s3.json",
						"-s3.port.iceberg=0", "-s3.port.lance=0",
						"-filer.localSocket=/data/filer.sock", "-s3.localSocket=/data/s3.sock",
						// Small volumes, none preallocated: the suite writes MiBs, make
						// bench-backup a few GiB (a backup is written twice: Store.Put).
						"-master.volumeSizeLimitMB=64", "-volume.max=64",
						// The master would report usage to seaweedfs.com.
						"-master.telemetry=false",
					},
					// SSE-S3 (x-amz-server-side-encryption: AES256) needs a key
					// to wrap the objects' keys with.
					Env:            []corev1.EnvVar{{Name: "WEED_S3_SSE_KEY", Value: "uring-redis e2e SSE-S3 key"}},
					Ports:          []corev1.ContainerPort{{Name: "s3", ContainerPort: storePort}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(storePort)}}, PeriodSeconds: 1},
					SecurityContext: &corev1.SecurityContext{
						AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true), ReadOnlyRootFilesystem: ptr.To(true),
						Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					},
					VolumeMounts: []corev1.VolumeMount{
						{Name: "data", MountPath: "/data"},
						{Name: "tmp", MountPath: "/tmp"},
						{Name: "config", MountPath: "/etc/seaweedfs", ReadOnly: true},
					},
				}},
				Volumes: []corev1.Volume{
					{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					{Name: "config", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: storeName + "-s3"}}},
				},
				SecurityContext:               &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
				AutomountServiceAccountToken:  ptr.To(false),
				TerminationGracePeriodSeconds: ptr.To[int64](0),
			},
		},
	}
	for _, o := range objects {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatalf("creating the object store's %T %s: %v", o, o.GetName(), err)
		}
	}
	pod := &corev1.Pod{}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: storeName}, pod); err != nil {
			return false, err
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the object store pod is not ready after 2m (%v): %+v\n%s", err, pod.Status, storeLogs(ns))
	}
}

// storeClient is an S3 client of the object store through a port-forward
// to its pod, and how to stop the forward.
func storeClient(t *testing.T) (*minio.Client, func()) {
	t.Helper()
	addr, stop := portForward(t, storeNamespace, storeName, storePort)
	c, err := minio.New(addr, &minio.Options{
		Creds:  credentials.NewStaticV4(storeAccessKey, storeSecretKey, ""),
		Region: storeRegion,
	})
	if err != nil {
		stop()
		t.Fatal(err)
	}
	return c, stop
}

// createBucket creates the bucket and waits until an object can be written
// into it: the S3 gateway listens seconds before the master has allocated
// its first volume and the filer has joined.
func createBucket(t *testing.T) {
	t.Helper()
	c, stop := storeClient(t)
	defer stop()
	const probe = "e2e-probe"
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		last = c.MakeBucket(ctx, storeBucket, minio.MakeBucketOptions{Region: storeRegion})
		if minio.ToErrorResponse(last).Code == "BucketAlreadyOwnedByYou" {
			last = nil
		}
		if last == nil {
			_, last = c.PutObject(ctx, storeBucket, probe, strings.NewReader(probe), int64(len(probe)), minio.PutObjectOptions{})
		}
		if last == nil {
			last = c.RemoveObject(ctx, storeBucket, probe, minio.RemoveObjectOptions{})
		}
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("the object store took no object into bucket %s within 2m: %v\n%s", storeBucket, last, storeLogs(storeNamespace))
	}
}

// getObject downloads an s3://bucket/key location from the object store
// and returns it with the server-side encryption the store reports for it.
func getObject(t *testing.T, location string) (data []byte, sse string) {
	t.Helper()
	bucket, key, ok := strings.Cut(strings.TrimPrefix(location, "s3://"), "/")
	if !ok || !strings.HasPrefix(location, "s3://") {
		t.Fatalf("location %q is not s3://<bucket>/<key>", location)
	}
	c, stop := storeClient(t)
	defer stop()
	obj, err := c.GetObject(context.Background(), bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = obj.Close() }()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(obj); err != nil {
		t.Fatalf("downloading %s: %v", location, err)
	}
	info, err := obj.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), info.Metadata.Get("X-Amz-Server-Side-Encryption")
}

func storeLogs(ns string) string {
	out, _ := execOutput(kubectl[0], append(append([]string{}, kubectl[1:]...), "-n", ns, "logs", storeName, "--tail", "60")...)
	return "$ kubectl -n " + ns + " logs " + storeName + "\n" + out
}
