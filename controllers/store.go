package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/backup"
)

// openStore signs in to rp's object store, at prefix in its bucket, with
// the access key of its credentials Secret and the CA of its caSecret. It
// reads them with reader, the API server: the operator caches no Secret it
// did not make. The operator itself talks to the store only to delete the
// objects of the backups retention expires and to read an archive a new
// instance recovers from; the agent does the rest, in the instance's pods.
func openStore(ctx context.Context, reader client.Reader, rp *v1alpha1.RedisPersistence, prefix string) (*backup.Store, error) {
	s3 := rp.Spec.Backup.Destination.S3
	d := backup.Destination{Endpoint: s3.Endpoint, Bucket: s3.Bucket, Prefix: prefix, Region: s3.RegionOrDefault(), SSE: string(s3.ServerSideEncryption)}
	creds := &corev1.Secret{}
	if err := reader.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: s3.Credentials.SecretName}, creds); err != nil {
		return nil, fmt.Errorf("reading the store's credentials: %w", err)
	}
	idKey, secretKey := s3.Credentials.Keys()
	d.AccessKey, d.SecretKey = string(creds.Data[idKey]), string(creds.Data[secretKey])
	if s3.CASecret != nil {
		ca := &corev1.Secret{}
		if err := reader.Get(ctx, types.NamespacedName{Namespace: rp.Namespace, Name: s3.CASecret.Name}, ca); err != nil {
			return nil, fmt.Errorf("reading the store's CA: %w", err)
		}
		d.CA = ca.Data[s3.CASecret.KeyOrDefault()]
	}
	return backup.Open(ctx, d)
}
