package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

func destination(s *testenv.ObjectStore, prefix string) Destination {
	return Destination{
		Endpoint:  s.Endpoint,
		Bucket:    s.Bucket,
		Prefix:    prefix,
		Region:    s.Region,
		AccessKey: s.AccessKey,
		SecretKey: s.SecretKey,
		CA:        s.CA,
	}
}

func open(t *testing.T, d Destination) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := Open(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// testData is a deterministic stream of size pseudo-random bytes.
func testData(seed uint64, size int64) io.Reader {
	return io.LimitReader(rand.NewChaCha8([32]byte{byte(seed)}), size)
}

func sha256Hex(r io.Reader) string {
	h := sha256.New()
	_, _ = io.Copy(h, r)
	return hex.EncodeToString(h.Sum(nil))
}

// TestStore runs against one SeaweedFS; each subtest has its own prefix.
func TestStore(t *testing.T) {
	t.Parallel()
	objects := testenv.StartObjectStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("a stream of unknown size goes up in parts and comes back verified", func(t *testing.T) {
		store := open(t, destination(objects, "cluster-a"))
		const size = streamPartSize + 4<<20 + 123 // two parts, the second short
		want := sha256Hex(testData(1, size))

		obj, err := store.Put(ctx, "base/1/dump.rdb", testData(1, size), -1)
		if err != nil {
			t.Fatal(err)
		}
		if obj != (Object{Key: "base/1/dump.rdb", Size: size, SHA256: want}) {
			t.Fatalf("Put returned %+v, want size %d and SHA-256 %s", obj, int64(size), want)
		}
		got := sha256.New()
		n, err := store.Get(ctx, "base/1/dump.rdb", got, want)
		if err != nil {
			t.Fatal(err)
		}
		if n != size || hex.EncodeToString(got.Sum(nil)) != want {
			t.Fatalf("Get wrote %d bytes with SHA-256 %x, want %d bytes with %s", n, got.Sum(nil), int64(size), want)
		}
		// The stream's digest is the caller's to record: the object has none.
		if _, err := store.Get(ctx, "base/1/dump.rdb", io.Discard, ""); err == nil || !strings.Contains(err.Error(), "no recorded SHA-256") {
			t.Errorf("Get with no digest to check against: %v, want a refusal", err)
		}
	})

	t.Run("a known size and a small object", func(t *testing.T) {
		store := open(t, destination(objects, "cluster-a"))
		obj, err := store.Put(ctx, "wal/appendonly.aof.1.incr.aof", strings.NewReader("*1\r\n$4\r\nPING\r\n"), 14)
		if err != nil {
			t.Fatal(err)
		}
		if obj.Size != 14 {
			t.Fatalf("Put returned size %d, want 14", obj.Size)
		}
		if err := store.PutBytes(ctx, "manifest.json", []byte(`{"version":1}`)); err != nil {
			t.Fatal(err)
		}
		got, err := store.GetBytes(ctx, "manifest.json")
		if err != nil || string(got) != `{"version":1}` {
			t.Fatalf("GetBytes = %q, %v", got, err)
		}
	})

	t.Run("an upload whose data is not what was hashed leaves no object", func(t *testing.T) {
		store := open(t, destination(objects, "cluster-c"))
		for _, size := range []int64{100, streamPartSize + 100} {
			want := sha256Hex(testData(3, size))
			if err := store.PutVerified(ctx, "base", testData(3, size), size, want); err != nil {
				t.Fatalf("%d bytes: %v", size, err)
			}
			if n, err := store.Get(ctx, "base", io.Discard, ""); err != nil || n != size {
				t.Fatalf("%d bytes read back as %d, %v", size, n, err)
			}
			err := store.PutVerified(ctx, "changed", testData(4, size), size, want)
			if err == nil || !strings.Contains(err.Error(), "changed while it was uploaded") {
				t.Errorf("%d bytes that are not what was hashed: %v, want a refusal", size, err)
			}
			if infos, err := store.List(ctx, "changed"); err != nil || len(infos) > 0 {
				t.Errorf("the refused upload left %v (%v)", infos, err)
			}
		}
	})

	t.Run("a wrong digest is refused", func(t *testing.T) {
		store := open(t, destination(objects, "cluster-b"))
		if err := store.PutBytes(ctx, "manifest.json", []byte("right")); err != nil {
			t.Fatal(err)
		}
		wrong := strings.Repeat("0", 64)
		_, err := store.Get(ctx, "manifest.json", io.Discard, wrong)
		right := sha256Hex(strings.NewReader("right"))
		for _, want := range []string{"cluster-b/manifest.json", right, wrong} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Get with a wrong digest: error %v, want one naming %s", err, want)
			}
		}

		// The object changes behind the store's back; its metadata still
		// records the digest of what was put.
		_, err = rawClient(t, objects).PutObject(ctx, objects.Bucket, "cluster-b/manifest.json", strings.NewReader("wrong"), 5,
			minio.PutObjectOptions{UserMetadata: map[string]string{"sha256": right}})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := store.GetBytes(ctx, "manifest.json"); err == nil || !strings.Contains(err.Error(), "corrupt") {
			t.Fatalf("GetBytes of a changed object = %q, %v; want a corruption error", got, err)
		}

		_, err = rawClient(t, objects).PutObject(ctx, objects.Bucket, "cluster-b/foreign", strings.NewReader("x"), 1, minio.PutObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.GetBytes(ctx, "foreign"); err == nil || !strings.Contains(err.Error(), "no recorded SHA-256") {
			t.Fatalf("GetBytes of an object without a digest: %v, want an error", err)
		}
	})

	t.Run("List and Delete stay in their prefix", func(t *testing.T) {
		a := open(t, destination(objects, "team-a"))
		a2 := open(t, destination(objects, "/team-a2/"))
		for _, key := range []string{"wal/1", "wal/2", "base/1"} {
			if err := a.PutBytes(ctx, key, []byte(key)); err != nil {
				t.Fatal(err)
			}
		}
		if err := a2.PutBytes(ctx, "wal/1", []byte("wal/1")); err != nil {
			t.Fatal(err)
		}

		listed := func(s *Store, prefix string) []string {
			t.Helper()
			infos, err := s.List(ctx, prefix)
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, info := range infos {
				if info.Size != int64(len(info.Key)) {
					t.Errorf("%s: size %d, want %d", info.Key, info.Size, len(info.Key))
				}
				if time.Since(info.LastModified).Abs() > time.Hour {
					t.Errorf("%s: last modified %s", info.Key, info.LastModified)
				}
				keys = append(keys, info.Key)
			}
			return keys
		}
		if got, want := listed(a, ""), []string{"base/1", "wal/1", "wal/2"}; !slices.Equal(got, want) {
			t.Fatalf("List(\"\") in team-a = %q, want %q", got, want)
		}
		if got, want := listed(a, "wal/"), []string{"wal/1", "wal/2"}; !slices.Equal(got, want) {
			t.Fatalf("List(\"wal/\") in team-a = %q, want %q", got, want)
		}
		if got, want := listed(a2, ""), []string{"wal/1"}; !slices.Equal(got, want) {
			t.Fatalf("List(\"\") in team-a2 = %q, want %q", got, want)
		}
		for prefix, want := range map[string][]string{"": {"base/", "wal/"}, "wal/": {"1", "2"}} {
			if got, err := a.Children(ctx, prefix); err != nil || !slices.Equal(got, want) {
				t.Fatalf("Children(%q) in team-a = %q, %v; want %q", prefix, got, err, want)
			}
		}

		if err := a.Delete(ctx, "wal/1", "wal/2", "never-written"); err != nil {
			t.Fatal(err)
		}
		if got, want := listed(a, ""), []string{"base/1"}; !slices.Equal(got, want) {
			t.Fatalf("after Delete, team-a holds %q, want %q", got, want)
		}
		if got, want := listed(a2, ""), []string{"wal/1"}; !slices.Equal(got, want) {
			t.Fatalf("after team-a's Delete, team-a2 holds %q, want %q", got, want)
		}
	})

	t.Run("server-side encryption", func(t *testing.T) {
		d := destination(objects, "encrypted")
		d.SSE = "AES256"
		store := open(t, d)
		obj, err := store.Put(ctx, "base", testData(2, 1<<20), -1)
		if err != nil {
			t.Fatal(err)
		}
		info, err := rawClient(t, objects).StatObject(ctx, objects.Bucket, "encrypted/base", minio.StatObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Metadata.Get("X-Amz-Server-Side-Encryption"); got != "AES256" {
			t.Errorf("x-amz-server-side-encryption is %q, want AES256", got)
		}
		var got bytes.Buffer
		if _, err := store.Get(ctx, "base", &got, obj.SHA256); err != nil {
			t.Fatal(err)
		}
		if sha256Hex(&got) != sha256Hex(testData(2, 1<<20)) {
			t.Fatal("the encrypted object came back different")
		}
	})

	t.Run("wrong credentials", func(t *testing.T) {
		for name, mutate := range map[string]func(*Destination){
			"secret key": func(d *Destination) { d.SecretKey = "not-the-secret" },
			"access key": func(d *Destination) { d.AccessKey = "nobody" },
		} {
			d := destination(objects, "")
			mutate(&d)
			_, err := Open(ctx, d)
			if err == nil || !strings.Contains(err.Error(), "access denied") || !strings.Contains(err.Error(), "check the credentials Secret") {
				t.Errorf("Open with a wrong %s: %v, want an access denied error", name, err)
			}
		}
	})

	t.Run("missing bucket", func(t *testing.T) {
		d := destination(objects, "")
		d.Bucket = "no-such-bucket"
		_, err := Open(ctx, d)
		if want := `bucket "no-such-bucket" does not exist at ` + objects.Endpoint; err == nil || err.Error() != want {
			t.Fatalf("Open of a missing bucket: %v, want %q", err, want)
		}
	})
}

func TestStoreUnreachable(t *testing.T) {
	t.Parallel()
	objects := testenv.StartObjectStore(t)
	store := open(t, destination(objects, "down"))
	objects.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := Open(ctx, destination(objects, "down"))
	if err == nil || !strings.Contains(err.Error(), "cannot reach the endpoint "+objects.Endpoint) {
		t.Fatalf("Open of a stopped endpoint: %v, want a cannot reach error", err)
	}
	if _, err := store.Put(ctx, "wal/1", testData(3, 1<<20), -1); err == nil {
		t.Fatal("Put to a stopped endpoint succeeded")
	}
	if _, err := store.GetBytes(ctx, "wal/1"); err == nil {
		t.Fatal("GetBytes from a stopped endpoint succeeded")
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("the stopped endpoint's errors took %s", elapsed)
	}
}

func TestStoreTLS(t *testing.T) {
	t.Parallel()
	ca := testenv.NewCA(t)
	objects := testenv.StartObjectStoreTLS(t, ca)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	store := open(t, destination(objects, "tls"))
	if err := store.PutBytes(ctx, "manifest.json", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if got, err := store.GetBytes(ctx, "manifest.json"); err != nil || string(got) != "{}" {
		t.Fatalf("GetBytes over TLS = %q, %v", got, err)
	}

	for name, caPEM := range map[string][]byte{"the system's": nil, "another": testenv.NewCA(t).PEM} {
		d := destination(objects, "tls")
		d.CA = caPEM
		if _, err := Open(ctx, d); err == nil || !strings.Contains(err.Error(), "is not trusted: check the CA") {
			t.Errorf("Open with %s CA: %v, want a certificate error", name, err)
		}
	}
}

func TestOpenRefusesABadDestination(t *testing.T) {
	ca := testenv.NewCA(t)
	valid := Destination{Endpoint: "https://s3.example.test", Bucket: "b", AccessKey: "a", SecretKey: "s"}
	for _, tc := range []struct {
		desc    string
		mutate  func(*Destination)
		wantErr string
	}{
		{"no scheme", func(d *Destination) { d.Endpoint = "s3.example.test:9000" }, "is not an http:// or https:// URL"},
		{"ftp", func(d *Destination) { d.Endpoint = "ftp://s3.example.test" }, "is not an http:// or https:// URL"},
		{"a path", func(d *Destination) { d.Endpoint = "https://s3.example.test/bucket" }, "has a path or query"},
		{"no bucket", func(d *Destination) { d.Bucket = "" }, "no bucket"},
		{"a CA for http", func(d *Destination) { d.Endpoint, d.CA = "http://s3.example.test", ca.PEM }, "a CA is given for the plain-http endpoint"},
		{"a CA that is no PEM", func(d *Destination) { d.CA = []byte("not a certificate") }, "the CA holds no PEM certificate"},
		{"SSE-KMS", func(d *Destination) { d.SSE = "aws:kms" }, `server-side encryption "aws:kms" is not supported`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			d := valid
			tc.mutate(&d)
			if _, err := Open(context.Background(), d); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Open: %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// rawClient reaches the bucket around the Store, to see and change what it
// wrote.
func rawClient(t *testing.T, s *testenv.ObjectStore) *minio.Client {
	t.Helper()
	client, err := minio.New(strings.TrimPrefix(s.Endpoint, "http://"), &minio.Options{
		Creds:  credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Region: s.Region,
	})
	if err != nil {
		t.Fatal(err)
	}
	return client
}
