package specs_test

import (
	"maps"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/specs/specstest"
)

// The connection Secret of each kind of instance holds exactly the keys an
// application needs for it, with the values that reach the instance's
// Services. The password is chosen to need escaping in a URL.
func TestConnectionSecret(t *testing.T) {
	const password = "p@ss:w/rd%?#"
	ca := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	replicatedTLS := specstest.ReplicatedSpec
	replicatedTLS.TLS = &v1alpha1.TLSSpec{SecretName: "cache-certs"}
	for _, tc := range []struct {
		desc string
		spec v1alpha1.RedisPersistenceSpec
		in   specs.ConnectionInputs
		want map[string]string
	}{{
		desc: "plain, generated password",
		spec: v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF},
		in:   specs.ConnectionInputs{Password: password},
		want: map[string]string{
			"REDIS_HOST": "cache.apps.svc", "REDIS_PORT": "6379", "REDIS_USERNAME": "default", "REDIS_PASSWORD": password,
			"REDIS_URL": "redis://default:p%40ss%3Aw%2Frd%25%3F%23@cache.apps.svc:6379",
		},
	}, {
		desc: "auth off",
		spec: specstest.GoldenCases["none"],
		want: map[string]string{"REDIS_HOST": "cache.apps.svc", "REDIS_PORT": "6379", "REDIS_URL": "redis://cache.apps.svc:6379"},
	}, {
		desc: "TLS",
		spec: specstest.GoldenCases["tls-secret"],
		in:   specs.ConnectionInputs{Password: "secret", CACert: ca},
		want: map[string]string{
			"REDIS_HOST": "cache.apps.svc", "REDIS_PORT": "6379", "REDIS_USERNAME": "default", "REDIS_PASSWORD": "secret",
			"REDIS_URL": "rediss://default:secret@cache.apps.svc:6379", "ca.crt": string(ca),
		},
	}, {
		desc: "replicated with Sentinel",
		spec: specstest.ReplicatedSpec,
		in:   specs.ConnectionInputs{Password: "secret"},
		want: map[string]string{
			"REDIS_HOST": "cache.apps.svc", "REDIS_PORT": "6379", "REDIS_USERNAME": "default", "REDIS_PASSWORD": "secret",
			"REDIS_URL":           "redis://default:secret@cache.apps.svc:6379",
			"REDIS_SENTINEL_HOST": "cache-sentinel.apps.svc", "REDIS_SENTINEL_PORT": "26379", "REDIS_SENTINEL_MASTER": "cache",
		},
	}, {
		desc: "replicated with Sentinel and TLS, auth off",
		spec: func() v1alpha1.RedisPersistenceSpec {
			s := replicatedTLS
			s.Auth = &v1alpha1.AuthSpec{Disabled: true}
			return s
		}(),
		in: specs.ConnectionInputs{CACert: ca},
		want: map[string]string{
			"REDIS_HOST": "cache.apps.svc", "REDIS_PORT": "6379", "REDIS_URL": "rediss://cache.apps.svc:6379",
			"REDIS_SENTINEL_HOST": "cache-sentinel.apps.svc", "REDIS_SENTINEL_PORT": "26379", "REDIS_SENTINEL_MASTER": "cache",
			"ca.crt": string(ca),
		},
	}} {
		t.Run(tc.desc, func(t *testing.T) {
			rp := specstest.NewRedisPersistence(tc.spec)
			secret := specs.ConnectionSecret(rp, tc.in)
			got := map[string]string{}
			for k, v := range secret.Data {
				got[k] = string(v)
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("data %v\nwant %v", got, tc.want)
			}
			if !equality.Semantic.DeepEqual(secret, specs.ConnectionSecret(rp, tc.in)) {
				t.Error("rendering the same spec twice gave different output")
			}
			if secret.Name != "cache-app" || secret.Namespace != "apps" || secret.Type != corev1.SecretTypeOpaque {
				t.Errorf("Secret %s/%s of type %s, want apps/cache-app, Opaque", secret.Namespace, secret.Name, secret.Type)
			}
			if !metav1.IsControlledBy(secret, rp) || secret.Labels[specs.LabelManagedBy] != specs.FieldOwner || secret.Labels[specs.LabelInstance] != "cache" {
				t.Errorf("the Secret must be the RedisPersistence's and labelled as the operator's: %+v", secret.ObjectMeta)
			}

			// Every key but the CA, meant for a file, becomes a variable a
			// shell can expand: envFrom takes them as they are.
			for key := range secret.Data {
				if errs := validation.IsCIdentifier(key); len(errs) > 0 && key != specs.CACertKey {
					t.Errorf("key %q is no environment variable name: %v", key, errs)
				}
			}

			// A client configured from the URL alone reaches the client
			// Service as the default user with the password, over TLS when
			// the server speaks only TLS.
			opts, err := redis.ParseURL(got["REDIS_URL"])
			if err != nil {
				t.Fatal(err)
			}
			svc := specs.ClientService(rp)
			if want := svc.Name + "." + svc.Namespace + ".svc:" + strconv.Itoa(int(svc.Spec.Ports[0].Port)); opts.Addr != want {
				t.Errorf("the URL's address %s is not the client Service's, %s", opts.Addr, want)
			}
			if opts.Password != tc.in.Password || (tc.in.Password != "" && opts.Username != "default") {
				t.Errorf("the URL's credentials are %q/%q, want default/%q", opts.Username, opts.Password, tc.in.Password)
			}
			if tls := opts.TLSConfig != nil; tls != specs.TLSEnabled(rp) {
				t.Errorf("the URL asks for TLS %v, the server speaks TLS %v", tls, specs.TLSEnabled(rp))
			}
			if specs.Replicated(rp) {
				sentinel := specs.SentinelService(rp)
				if got["REDIS_SENTINEL_HOST"] != sentinel.Name+"."+sentinel.Namespace+".svc" || got["REDIS_SENTINEL_PORT"] != strconv.Itoa(int(sentinel.Spec.Ports[0].Port)) {
					t.Errorf("the Sentinel address is not the Sentinel Service's %s/%d", sentinel.Name, sentinel.Spec.Ports[0].Port)
				}
			}
		})
	}
}
