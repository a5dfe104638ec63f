package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/specs/specstest"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

func createSecret(t *testing.T, ns, name, password string) {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string][]byte{"password": []byte(password)}}
	if err := k8s.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
}

// An instance with auth, whose server is up and asked for its INFO with the
// password, must not stop the operator: the operator runs with the role its
// markers generate (get, list, watch on Secrets), reads the password uncached,
// and a dozen instances created afterwards in another namespace all get their
// status.
func TestAuthInstanceBlocksNoOne(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	createSecret(t, ns, "redis-auth", "first-password")
	auth := &v1alpha1.AuthSpec{SecretRef: &v1alpha1.SecretKeyRef{Name: "redis-auth", Key: "password"}}
	deleteAtEnd(t, createRP(t, ns, "guarded", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, Auth: auth}))
	waitCondition(t, ns, "guarded", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)

	// The real server, with the password the prepare container would have
	// written to the include file.
	serverAddrs.Store(ns+"/guarded-0", testenv.StartServer(t, renderedConfig(t, ns, "guarded")+"requirepass first-password\n"))
	actAsKubelet(t, ns, "guarded-0", "ext4")
	got := waitCondition(t, ns, "guarded", v1alpha1.ConditionReady, metav1.ConditionTrue, ReasonReady)
	if got.Status.Engine != "posix" {
		t.Errorf("engine %q: the operator did not read the server's INFO with the password", got.Status.Engine)
	}

	others := newNamespace(t)
	const count = 12
	for i := range count {
		createRP(t, others, fmt.Sprintf("other-%d", i), v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone})
	}
	for i := range count {
		waitCondition(t, others, fmt.Sprintf("other-%d", i), v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	}

	// A new password reaches the running server through the Secret watch
	// alone (the RedisPersistence itself does not change), without a
	// restart: the pod template stays, the server takes both passwords.
	sts := &appsv1.StatefulSet{}
	if err := get(t, sts, ns, "guarded"); err != nil {
		t.Fatal(err)
	}
	firstHash, generation := sts.Spec.Template.Annotations[specs.AnnotationAuthHash], sts.Generation
	if firstHash == "" {
		t.Fatal("the pod template carries no auth hash")
	}
	secret := &corev1.Secret{}
	if err := get(t, secret, ns, "redis-auth"); err != nil {
		t.Fatal(err)
	}
	secret.Data["password"] = []byte("second-password")
	if err := k8s.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	addr, _ := serverAddrs.Load(ns + "/guarded-0")
	eventually(t, 30*time.Second, func() error { return signIn(addr.(string), "default", "second-password") })
	if err := signIn(addr.(string), "default", "first-password"); err != nil {
		t.Errorf("the previous password is refused within the grace period: %v", err)
	}
	waitEvent(t, ns, "guarded", "RotatedPassword")
	if err := get(t, sts, ns, "guarded"); err != nil {
		t.Fatal(err)
	}
	if sts.Generation != generation || sts.Spec.Template.Annotations[specs.AnnotationAuthHash] != firstHash {
		t.Errorf("the password's rotation changed the pod template: generation %d -> %d, auth hash %s -> %s",
			generation, sts.Generation, firstHash, sts.Spec.Template.Annotations[specs.AnnotationAuthHash])
	}
	for _, v := range sts.Spec.Template.Annotations {
		if strings.Contains(v, "password") {
			t.Errorf("the pod template carries the password: %v", sts.Spec.Template.Annotations)
		}
	}
}

// A Secret that does not exist yet holds the instance back with a condition
// that says so; creating it is enough for the operator to go on.
func TestAuthSecretMissing(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	createRP(t, ns, "early", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone,
		Auth: &v1alpha1.AuthSpec{SecretRef: &v1alpha1.SecretKeyRef{Name: "later", Key: "password"}}})
	got := waitCondition(t, ns, "early", v1alpha1.ConditionReady, metav1.ConditionFalse, ReasonAuthSecretMissing)
	if msg := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "later") {
		t.Errorf("the condition does not name the Secret: %q", msg)
	}
	createSecret(t, ns, "later", "a-password")
	waitCondition(t, ns, "early", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
}

// Without spec.auth the operator generates a password into <name>-auth and
// the server, its probes and the exporter use it as they would a Secret of
// the user's. The Secret outlives the RedisPersistence, like the data: the
// same name created again finds the same password.
func TestGeneratedPassword(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	createRP(t, ns, "closed", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF})
	waitCondition(t, ns, "closed", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)

	secret := &corev1.Secret{}
	if err := get(t, secret, ns, "closed-auth"); err != nil {
		t.Fatal(err)
	}
	password := string(secret.Data["password"])
	if len(password) < 32 {
		t.Errorf("generated password %q is shorter than 32 characters", password)
	}
	if len(secret.OwnerReferences) != 0 || secret.Labels[specs.LabelManagedBy] != specs.FieldOwner || secret.Labels[specs.LabelInstance] != "closed" {
		t.Errorf("the generated Secret must be labelled as the operator's and owned by no one (it outlives the instance): %+v", secret.ObjectMeta)
	}
	if len(eventsFor(t, ns, "closed", "GeneratedPassword")) == 0 {
		t.Error("no GeneratedPassword event")
	}
	if !strings.Contains(renderedConfig(t, ns, "closed"), "requirepass") {
		t.Fatal("redis.conf does not include the auth file")
	}
	sts := &appsv1.StatefulSet{}
	if err := get(t, sts, ns, "closed"); err != nil {
		t.Fatal(err)
	}
	if sts.Spec.Template.Annotations[specs.AnnotationAuthHash] == "" || sts.Annotations[specs.AnnotationAuthSource] != string(specs.AuthGenerated) {
		t.Errorf("StatefulSet annotations %v, template annotations %v", sts.Annotations, sts.Spec.Template.Annotations)
	}
	for _, c := range append(sts.Spec.Template.Spec.InitContainers, sts.Spec.Template.Spec.Containers...) {
		want := "closed-auth/password"
		if c.Name == specs.ContainerExporter {
			want = "closed-acl/exporter" // its ACL user's (redispersistence_acl.go)
		}
		if env := secretEnv(c); env != want {
			t.Errorf("container %s reads the password from %q, want %s", c.Name, env, want)
		}
	}

	// The real server with the generated password: the operator reads its INFO with it.
	serverAddrs.Store(ns+"/closed-0", testenv.StartServer(t, renderedConfig(t, ns, "closed")))
	actAsKubelet(t, ns, "closed-0", "ext4")
	if got := waitCondition(t, ns, "closed", v1alpha1.ConditionReady, metav1.ConditionTrue, ReasonReady); got.Status.Engine != "posix" {
		t.Errorf("engine %q: the operator did not read the server's INFO with the generated password", got.Status.Engine)
	}

	rp := &v1alpha1.RedisPersistence{}
	if err := get(t, rp, ns, "closed"); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(context.Background(), rp); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error {
		if err := get(t, &appsv1.StatefulSet{}, ns, "closed"); err == nil {
			return fmt.Errorf("the StatefulSet is still there")
		}
		return nil
	})
	if err := get(t, secret, ns, "closed-auth"); err != nil {
		t.Fatalf("the generated Secret went with the RedisPersistence: %v", err)
	}
	again := &v1alpha1.RedisPersistence{ObjectMeta: metav1.ObjectMeta{Name: "closed", Namespace: ns},
		Spec: v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeAOF, Storage: &v1alpha1.StorageSpec{StorageClassName: storageClass}}}
	if err := k8s.Create(context.Background(), again); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ns, "closed", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	if got := instancePassword(t, ns, "closed"); got != password {
		t.Error("the RedisPersistence created again under the same name got a new password")
	}
}

// secretEnv is "secret/key" of the container's password variable, "" without one.
func secretEnv(c corev1.Container) string {
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			return e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		}
	}
	return ""
}

// A Secret named like the generated one that the operator did not make is
// never overwritten nor used.
func TestGeneratedPasswordSecretTaken(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	createSecret(t, ns, "taken-auth", "someone-elses")
	createRP(t, ns, "taken", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone})
	got := waitCondition(t, ns, "taken", v1alpha1.ConditionReady, metav1.ConditionFalse, ReasonAuthSecretMissing)
	if msg := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "taken-auth") || !strings.Contains(msg, "not the operator's") {
		t.Errorf("the condition does not say whose the Secret is: %q", msg)
	}
	secret := &corev1.Secret{}
	if err := get(t, secret, ns, "taken-auth"); err != nil || string(secret.Data["password"]) != "someone-elses" {
		t.Errorf("the user's Secret changed: %v %v", secret.Data, err)
	}
	if err := get(t, &appsv1.StatefulSet{}, ns, "taken"); err == nil {
		t.Error("a StatefulSet was made without a password the operator can vouch for")
	}
}

// spec.auth.disabled runs without a password and says so with a Warning
// event; going back to no spec.auth is the choice of a generated password.
func TestAuthDisabled(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	createRP(t, ns, "open", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone, Auth: &v1alpha1.AuthSpec{Disabled: true}})
	waitCondition(t, ns, "open", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	eventually(t, 30*time.Second, func() error {
		if len(eventsFor(t, ns, "open", "RunningWithoutPassword")) == 0 {
			return fmt.Errorf("no RunningWithoutPassword event")
		}
		return nil
	})
	if config := renderedConfig(t, ns, "open"); strings.Contains(config, "auth.conf") || strings.Contains(config, "requirepass") {
		t.Errorf("redis.conf of a password-less server sets one:\n%s", config)
	}
	if err := get(t, &corev1.Secret{}, ns, "open-auth"); err == nil {
		t.Error("a password was generated for spec.auth.disabled")
	}
	sts := &appsv1.StatefulSet{}
	if err := get(t, sts, ns, "open"); err != nil {
		t.Fatal(err)
	}
	if sts.Annotations[specs.AnnotationAuthSource] != string(specs.AuthDisabled) {
		t.Errorf("StatefulSet annotations %v", sts.Annotations)
	}

	rp := updateRP(t, ns, "open", func(rp *v1alpha1.RedisPersistence) { rp.Spec.Auth = nil })
	eventually(t, 30*time.Second, func() error {
		if err := get(t, sts, ns, "open"); err != nil {
			return err
		}
		if sts.Spec.Template.Annotations[specs.AnnotationAuthHash] == "" {
			return fmt.Errorf("the pod template has no password yet")
		}
		return nil
	})
	if err := get(t, rp, ns, "open"); err != nil {
		t.Fatal(err)
	}
	if _, marked := rp.Annotations[specs.AnnotationPredatesClosedDefaults]; marked {
		t.Error("an instance of this operator was taken for one from before generated passwords")
	}
}

// An instance that ran without a password under an operator older than
// generated passwords keeps running without one after the operator upgrade,
// with no restart: its clients connect without a password. Removing the
// annotation that records it is the choice to close it.
func TestAuthPredatesGeneratedPasswords(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	opts := versionOptions("redis-uring:v1")
	clock := clocktesting.NewFakePassiveClock(testNow)
	rp := &v1alpha1.RedisPersistence{
		ObjectMeta: metav1.ObjectMeta{Name: "legacy", Namespace: ns, Labels: map[string]string{upgradeTestOperator: ns}},
		Spec:       v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone, Auth: &v1alpha1.AuthSpec{Disabled: true}},
	}
	if err := k8s.Create(context.Background(), rp); err != nil {
		t.Fatal(err)
	}
	op := startOperator(t, ns, opts, 1, clock)
	readyOn(t, ns, "legacy", "redis-uring:v1")
	op.stop()

	// What the previous operator left: the same pod template, no record of
	// where the password comes from, and no spec.auth.
	sts := &appsv1.StatefulSet{}
	if err := get(t, sts, ns, "legacy"); err != nil {
		t.Fatal(err)
	}
	generation := sts.Generation
	if err := k8s.Patch(context.Background(), sts, client.RawPatch(types.MergePatchType,
		[]byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, specs.AnnotationAuthSource)))); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Patch(context.Background(), rp, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"auth":null}}`))); err != nil {
		t.Fatal(err)
	}

	startOperator(t, ns, opts, 1, clock)
	eventually(t, 30*time.Second, func() error {
		if err := get(t, rp, ns, "legacy"); err != nil {
			return err
		}
		if rp.Annotations[specs.AnnotationPredatesClosedDefaults] != "password,networkPolicy" {
			return fmt.Errorf("annotations %v", rp.Annotations)
		}
		if err := get(t, sts, ns, "legacy"); err != nil {
			return err
		}
		if sts.Annotations[specs.AnnotationAuthSource] != string(specs.AuthPredatesGenerated) {
			return fmt.Errorf("StatefulSet annotations %v", sts.Annotations)
		}
		return nil
	})
	if len(eventsFor(t, ns, "legacy", "KeptOpen")) == 0 {
		t.Error("no KeptOpen event")
	}
	waitCondition(t, ns, "legacy", v1alpha1.ConditionUpToDate, metav1.ConditionTrue, ReasonUpToDate)
	waitCondition(t, ns, "legacy", v1alpha1.ConditionReady, metav1.ConditionTrue, ReasonReady)
	if err := get(t, sts, ns, "legacy"); err != nil {
		t.Fatal(err)
	}
	if sts.Generation != generation || sts.Spec.Template.Annotations[specs.AnnotationAuthHash] != "" {
		t.Errorf("the operator upgrade changed the pod template (generation %d -> %d, annotations %v)", generation, sts.Generation, sts.Spec.Template.Annotations)
	}
	if err := get(t, &corev1.Secret{}, ns, "legacy-auth"); err == nil {
		t.Error("a password was generated for an instance whose clients connect without one")
	}
	if err := get(t, &networkingv1.NetworkPolicy{}, ns, "legacy"); err == nil {
		t.Error("a NetworkPolicy was made for an instance whose clients carry no client label")
	}

	// The owner's choice: a generated password, rolled at once.
	if err := k8s.Patch(context.Background(), rp, client.RawPatch(types.MergePatchType,
		[]byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, specs.AnnotationPredatesClosedDefaults)))); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error {
		if err := get(t, sts, ns, "legacy"); err != nil {
			return err
		}
		if sts.Spec.Template.Annotations[specs.AnnotationAuthHash] == "" || sts.Annotations[specs.AnnotationAuthSource] != string(specs.AuthGenerated) {
			return fmt.Errorf("StatefulSet annotations %v, template annotations %v", sts.Annotations, sts.Spec.Template.Annotations)
		}
		if err := get(t, &networkingv1.NetworkPolicy{}, ns, "legacy"); err != nil {
			return err
		}
		return get(t, &corev1.Secret{}, ns, "legacy-auth")
	})
}

// Every instance gets the NetworkPolicy the builder makes, owned by it, put
// back when changed, and deleted when its spec turns it off.
func TestNetworkPolicy(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	rp := createRP(t, ns, "fenced", v1alpha1.RedisPersistenceSpec{Mode: v1alpha1.ModeNone})
	np := &networkingv1.NetworkPolicy{}
	eventually(t, 30*time.Second, func() error { return get(t, np, ns, "fenced") })
	if ref := metav1.GetControllerOf(np); ref == nil || ref.UID != rp.UID {
		t.Errorf("the NetworkPolicy is not controlled by the RedisPersistence: %v", ref)
	}
	want := specs.NetworkPolicy(rp, specstest.Options.NetworkPolicy)
	if !equality.Semantic.DeepEqual(np.Spec, want.Spec) {
		t.Errorf("NetworkPolicy spec\n%+v\nwant\n%+v", np.Spec, want.Spec)
	}

	// Drift is put back.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := get(t, np, ns, "fenced"); err != nil {
			return err
		}
		np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{}}
		return k8s.Update(context.Background(), np)
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error {
		if err := get(t, np, ns, "fenced"); err != nil {
			return err
		}
		if !equality.Semantic.DeepEqual(np.Spec, want.Spec) {
			return fmt.Errorf("the NetworkPolicy still admits everyone: %+v", np.Spec.Ingress)
		}
		return nil
	})

	updateRP(t, ns, "fenced", func(rp *v1alpha1.RedisPersistence) {
		rp.Spec.NetworkPolicy = &v1alpha1.NetworkPolicySpec{Enabled: ptr.To(false)}
	})
	eventually(t, 30*time.Second, func() error {
		if err := get(t, np, ns, "fenced"); err == nil {
			return fmt.Errorf("the NetworkPolicy is still there")
		}
		return nil
	})
	if len(eventsFor(t, ns, "fenced", "DeletedNetworkPolicy")) == 0 {
		t.Error("no DeletedNetworkPolicy event")
	}
}
