package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"iter"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/encrypt"
)

// Destination is where backups go: a bucket, and a prefix in it, on an
// S3-compatible endpoint (AWS S3, MinIO, SeaweedFS, Ceph RGW, ...).
type Destination struct {
	// Endpoint is the endpoint's URL, http:// or https://, without a path.
	Endpoint string
	Bucket   string
	// Prefix is prepended with "/" to every key; "" stores keys at the
	// bucket's top.
	Prefix string
	// Region signs the requests; "" asks the endpoint for the bucket's.
	Region    string
	AccessKey string
	SecretKey string
	// CA is the PEM of the certificate authorities an https endpoint's
	// certificate must chain to, in place of the system's; nil trusts the
	// system's.
	CA []byte
	// SSE asks the endpoint to encrypt what it stores: "" (the bucket's
	// default) or "AES256" (SSE-S3, keys held by the endpoint).
	SSE string
	// Compression is how snapshots and archive segments written to it are
	// compressed; readers find out from what they read.
	Compression Compression
}

// Store puts objects into a Destination and gets them back, verified
// against their SHA-256. It does not retry: every method makes its requests
// once and returns the first error, for the caller to retry with backoff.
// Errors name the bucket and key but no request ID, so they stay the same
// from one attempt to the next.
type Store struct {
	client *minio.Client
	bucket string
	prefix string
	sse    encrypt.ServerSide
}

// Object is an object the Store wrote.
type Object struct {
	Key    string // relative to the Destination's prefix
	Size   int64
	SHA256 string // hex
}

// ObjectInfo is an object List found.
type ObjectInfo struct {
	Key          string // relative to the Destination's prefix
	Size         int64
	LastModified time.Time
}

const (
	// streamPartSize is the size of the parts of an upload of unknown size,
	// and the memory it buffers: minio-go would otherwise size them for
	// 5 TiB, 528 MiB each. 10,000 parts of 16 MiB make objects up to
	// 156 GiB. With a known size minio-go's parts are 16 MiB too, larger
	// only when the object needs them.
	streamPartSize = 16 << 20

	// sha256Metadata is the user metadata (x-amz-meta-sha256) that records
	// an object's digest; minio-go reports user metadata keys canonicalised
	// as HTTP headers.
	sha256Metadata          = "sha256"
	sha256MetadataCanonical = "Sha256"
)

// Open connects to d's endpoint and checks that the bucket exists and the
// credentials may list d's prefix in it. Its errors say which of the
// endpoint, the credentials or the bucket is wrong.
//
// The check is a listing of the prefix, one key long, and not HeadBucket:
// S3 authorises HeadBucket as s3:ListBucket with no prefix, which a key
// allowed to list only its prefix (docs/backup.md, Least privilege) is
// refused.
func Open(ctx context.Context, d Destination) (*Store, error) {
	u, err := url.Parse(d.Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("endpoint %q is not an http:// or https:// URL", d.Endpoint)
	}
	if strings.Trim(u.Path, "/") != "" || u.RawQuery != "" {
		return nil, fmt.Errorf("endpoint %q has a path or query: give the bucket and prefix on their own", d.Endpoint)
	}
	if d.Bucket == "" {
		return nil, errors.New("no bucket is given")
	}
	secure := u.Scheme == "https"
	transport, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, err
	}
	if len(d.CA) > 0 {
		if !secure {
			return nil, fmt.Errorf("a CA is given for the plain-http endpoint %s", d.Endpoint)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(d.CA) {
			return nil, errors.New("the CA holds no PEM certificate")
		}
		transport.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	}
	var sse encrypt.ServerSide
	switch d.SSE {
	case "":
	case "AES256":
		sse = encrypt.NewSSE()
	default:
		return nil, fmt.Errorf("server-side encryption %q is not supported: use \"\" or \"AES256\"", d.SSE)
	}
	client, err := minio.New(u.Host, &minio.Options{
		Creds:     credentials.NewStaticV4(d.AccessKey, d.SecretKey, ""),
		Secure:    secure,
		Transport: transport,
		Region:    d.Region,
		// Path-style requests (endpoint/bucket/key) for every endpoint but
		// AWS's, Google's and Aliyun's, which get virtual-host style.
		BucketLookup: minio.BucketLookupAuto,
		MaxRetries:   1,
	})
	if err != nil {
		return nil, fmt.Errorf("endpoint %s: %w", d.Endpoint, err)
	}
	store := &Store{client: client, bucket: d.Bucket, prefix: strings.Trim(d.Prefix, "/"), sse: sse}
	err = store.listOne(ctx)
	switch {
	case err == nil:
		return store, nil
	case minio.ToErrorResponse(err).Code == minio.NoSuchBucket:
		return nil, fmt.Errorf("bucket %q does not exist at %s", d.Bucket, d.Endpoint)
	case accessDenied(err):
		return nil, fmt.Errorf("access denied to %s at %s: check the credentials Secret's access key and secret key, and that its policy allows s3:ListBucket of that prefix (%w)", store.URL(""), d.Endpoint, err)
	case untrustedCertificate(err):
		return nil, fmt.Errorf("the certificate of %s is not trusted: check the CA (%w)", d.Endpoint, err)
	case unreachable(err):
		return nil, fmt.Errorf("cannot reach the endpoint %s (%w)", d.Endpoint, err)
	default:
		return nil, fmt.Errorf("checking bucket %q at %s: %w", d.Bucket, d.Endpoint, err)
	}
}

// listOne lists the first key under the store's prefix, if there is one.
func (s *Store) listOne(ctx context.Context) error {
	next, stop := iter.Pull(s.client.ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.objectName(""), MaxKeys: 1}))
	defer stop()
	obj, ok := next()
	if !ok {
		return nil
	}
	return obj.Err
}

func accessDenied(err error) bool {
	switch minio.ToErrorResponse(err).Code {
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch":
		return true
	}
	return false
}

func untrustedCertificate(err error) bool {
	var unknownAuthority x509.UnknownAuthorityError
	var verification *tls.CertificateVerificationError
	return errors.As(err, &unknownAuthority) || errors.As(err, &verification)
}

func unreachable(err error) bool {
	var opErr *net.OpError
	var dnsErr *net.DNSError
	return errors.As(err, &opErr) || errors.As(err, &dnsErr) || errors.Is(err, context.DeadlineExceeded)
}

// Put uploads r as key and returns its size and SHA-256, which it computes
// while streaming. size is r's length, or -1 when unknown: the upload is
// then multipart, one 16 MiB part in memory at a time, up to 156 GiB. The
// object carries no digest of its own (S3 sets metadata only when an
// object is written, and a stream's digest is known only at its end): the
// caller records it where the object is named, as a backup's metadata
// does, and Get checks against that.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) (Object, error) {
	name := s.objectName(key)
	digest := &digestReader{r: r, sha: sha256.New()}
	opts := s.putOptions(nil)
	if size < 0 {
		opts.PartSize = streamPartSize
	}
	if _, err := s.client.PutObject(ctx, s.bucket, name, digest, size, opts); err != nil {
		return Object{}, fmt.Errorf("uploading %s to bucket %q: %w", name, s.bucket, err)
	}
	return Object{Key: key, Size: digest.n, SHA256: hex.EncodeToString(digest.sha.Sum(nil))}, nil
}

// PutBytes uploads b as key, with its SHA-256 in the metadata in the same
// request.
func (s *Store) PutBytes(ctx context.Context, key string, b []byte) error {
	sum := sha256.Sum256(b)
	opts := s.putOptions(map[string]string{sha256Metadata: hex.EncodeToString(sum[:])})
	name := s.objectName(key)
	if _, err := s.client.PutObject(ctx, s.bucket, name, bytes.NewReader(b), int64(len(b)), opts); err != nil {
		return fmt.Errorf("uploading %s to bucket %q: %w", name, s.bucket, err)
	}
	return nil
}

// PutVerified uploads size bytes of r as key, with sha (the SHA-256 the
// caller computed of them) in the metadata from the first request: the
// object appears, digest and all, only once the upload completes, and the
// upload fails, leaving no object, if what r yields has another digest (a
// file that changed since it was hashed).
func (s *Store) PutVerified(ctx context.Context, key string, r io.Reader, size int64, sha string) error {
	name := s.objectName(key)
	body := &verifyingReader{digestReader: digestReader{r: r, sha: sha256.New()}, size: size, want: sha}
	opts := s.putOptions(map[string]string{sha256Metadata: sha})
	opts.PartSize = streamPartSize
	if _, err := s.client.PutObject(ctx, s.bucket, name, body, size, opts); err != nil {
		return fmt.Errorf("uploading %s to bucket %q: %w", name, s.bucket, err)
	}
	return nil
}

// verifyingReader is a digestReader whose last read fails unless the
// digest is the one wanted. That read returns no bytes with its error: a
// reader filling a buffer (io.ReadFull) drops the error of a read that
// filled it.
type verifyingReader struct {
	digestReader
	size int64
	want string
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	n, err := v.digestReader.Read(p)
	if v.n >= v.size {
		if got := hex.EncodeToString(v.sha.Sum(nil)); got != v.want || v.n > v.size {
			return 0, fmt.Errorf("the data changed while it was uploaded: %d bytes with SHA-256 %s, not %d with %s", v.n, got, v.size, v.want)
		}
	}
	return n, err
}

func (s *Store) putOptions(metadata map[string]string) minio.PutObjectOptions {
	return minio.PutObjectOptions{
		UserMetadata:         metadata,
		ServerSideEncryption: s.sse,
		ContentType:          "application/octet-stream",
	}
}

// Get downloads key into w and returns its size. It then compares the
// SHA-256 of what it wrote with wantSHA256, or with the object's recorded
// x-amz-meta-sha256 when wantSHA256 is "": w holds the object, but only a
// nil error says it is the one that was stored.
func (s *Store) Get(ctx context.Context, key string, w io.Writer, wantSHA256 string) (int64, error) {
	name := s.objectName(key)
	obj, err := s.client.GetObject(ctx, s.bucket, name, minio.GetObjectOptions{})
	if err != nil {
		return 0, fmt.Errorf("downloading %s from bucket %q: %w", name, s.bucket, err)
	}
	defer func() { _ = obj.Close() }()
	info, err := obj.Stat()
	if err != nil {
		return 0, fmt.Errorf("downloading %s from bucket %q: %w", name, s.bucket, err)
	}
	if wantSHA256 == "" {
		if wantSHA256 = info.UserMetadata[sha256MetadataCanonical]; wantSHA256 == "" {
			return 0, fmt.Errorf("%s in bucket %q has no recorded SHA-256 to verify it against", name, s.bucket)
		}
	}
	sha := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, sha), obj)
	if err != nil {
		return n, fmt.Errorf("downloading %s from bucket %q: %w", name, s.bucket, err)
	}
	if got := hex.EncodeToString(sha.Sum(nil)); !strings.EqualFold(got, wantSHA256) {
		return n, fmt.Errorf("%s in bucket %q is corrupt: its SHA-256 is %s, want %s", name, s.bucket, got, wantSHA256)
	}
	return n, nil
}

// GetBytes downloads key, verified against its recorded SHA-256.
func (s *Store) GetBytes(ctx context.Context, key string) ([]byte, error) {
	var b bytes.Buffer
	if _, err := s.Get(ctx, key, &b, ""); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// List returns the objects whose keys start with prefix, relative to the
// Destination's prefix, in key order.
func (s *Store) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	var infos []ObjectInfo
	full := s.objectName(prefix)
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: full, Recursive: true}) {
		if obj.Err != nil {
			return nil, fmt.Errorf("listing %s in bucket %q: %w", full, s.bucket, obj.Err)
		}
		infos = append(infos, ObjectInfo{
			Key:          strings.TrimPrefix(obj.Key, s.objectName("")),
			Size:         obj.Size,
			LastModified: obj.LastModified,
		})
	}
	return infos, nil
}

// Children lists what is directly under prefix (which ends in "/"): the
// names of its objects, and of its folders with a "/" after them, in key
// order. It reads one level, where List reads every object below.
func (s *Store) Children(ctx context.Context, prefix string) ([]string, error) {
	var names []string
	full := s.objectName(prefix)
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: full}) {
		if obj.Err != nil {
			return nil, fmt.Errorf("listing %s in bucket %q: %w", full, s.bucket, obj.Err)
		}
		names = append(names, strings.TrimPrefix(obj.Key, full))
	}
	return names, nil
}

// Delete removes keys; a key that does not exist is no error.
func (s *Store) Delete(ctx context.Context, keys ...string) error {
	objects := make(chan minio.ObjectInfo, len(keys))
	for _, key := range keys {
		objects <- minio.ObjectInfo{Key: s.objectName(key)}
	}
	close(objects)
	var errs []error
	for failed := range s.client.RemoveObjects(ctx, s.bucket, objects, minio.RemoveObjectsOptions{}) {
		errs = append(errs, fmt.Errorf("deleting %s from bucket %q: %w", failed.ObjectName, s.bucket, failed.Err))
	}
	return errors.Join(errs...)
}

// objectName is key's name in the bucket.
func (s *Store) objectName(key string) string {
	if s.prefix == "" {
		return key
	}
	return s.prefix + "/" + key
}

// digestReader hashes and counts what is read through it.
type digestReader struct {
	r   io.Reader
	sha hash.Hash
	n   int64
}

func (d *digestReader) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	d.sha.Write(p[:n])
	d.n += int64(n)
	return n, err
}
