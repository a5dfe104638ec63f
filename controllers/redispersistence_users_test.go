package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
	"github.com/uring-redis/uring-redis-operator/internal/testenv"
)

func userClient(addr, user, password string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, Username: user, Password: password, DisableIdentity: true, MaxRetries: -1})
}

// signIn is the error a new connection of user gets signing in: nil once
// the server took the password (a PING its rules refuse included).
func signIn(addr, user, password string) error {
	c := userClient(addr, user, password)
	defer func() { _ = c.Close() }()
	if err := c.Ping(context.Background()).Err(); err != nil && !strings.HasPrefix(err.Error(), "NOPERM") {
		return err
	}
	return nil
}

func secretData(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	s := &corev1.Secret{}
	if err := get(t, s, ns, name); err != nil {
		t.Fatal(err)
	}
	data := map[string]string{}
	for k, v := range s.Data {
		data[k] = string(v)
	}
	return data
}

// TestApplicationUsers: spec.users become ACL users on the running server,
// live, with their key and command rules; a generated password lands in
// <name>-user-<user> and each user gets its connection Secret; rotating a
// password keeps a connected client and the previous password working for
// spec.passwordGracePeriod, then only the new one; a rule the server refuses
// is reported with the server's error; a disabled user is refused and
// disconnected; a removed or hand-made user goes; a server started again
// reads the users from the Secret <name>-users, which holds no password.
func TestApplicationUsers(t *testing.T) {
	ensureNodes(t)
	ctx := context.Background()
	ns := newNamespace(t)
	if err := k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reader-password"},
		Data:       map[string][]byte{"pw": []byte(`r"e ad\er`)},
	}); err != nil {
		t.Fatal(err)
	}
	orders := v1alpha1.UserSpec{Name: "orders", Keys: []string{"orders:*"}, Commands: []string{"+@all", "-flushall"}}
	reader := v1alpha1.UserSpec{Name: "reader", PasswordSecretRef: &v1alpha1.SecretKeyRef{Name: "reader-password", Key: "pw"}, Keys: []string{"*"}, Commands: []string{"+@read", "+ping"}}
	shop := createRP(t, ns, "shop", v1alpha1.RedisPersistenceSpec{
		Mode:                v1alpha1.ModeAOF,
		Users:               []v1alpha1.UserSpec{orders, reader},
		PasswordGracePeriod: &metav1.Duration{Duration: 8 * time.Second},
	})
	deleteAtEnd(t, shop)
	waitCondition(t, ns, "shop", v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	addr := testenv.StartServer(t, renderedConfig(t, ns, "shop"))
	serverAddrs.Store(ns+"/shop-0", addr)
	markRunning(t, ns, "shop-0")
	waitCondition(t, ns, "shop", v1alpha1.ConditionUsersReady, metav1.ConditionTrue, ReasonUsersApplied)
	admin := newClient(addr, instancePassword(t, ns, "shop"))
	defer func() { _ = admin.Close() }()
	runID := serverRunID(t, admin)

	// The generated password, kept like the default one; the Secrets.
	generated := &corev1.Secret{}
	if err := get(t, generated, ns, "shop-user-orders"); err != nil {
		t.Fatal(err)
	}
	if len(generated.OwnerReferences) != 0 || generated.Labels[specs.LabelUser] != "orders" {
		t.Errorf("the generated password Secret has owners %v and labels %v", generated.OwnerReferences, generated.Labels)
	}
	ordersPassword := string(generated.Data["password"])
	if len(ordersPassword) != 43 {
		t.Errorf("generated password of %d characters, want 43", len(ordersPassword))
	}
	conn := secretData(t, ns, "shop-app-orders")
	if conn["REDIS_USERNAME"] != "orders" || conn["REDIS_PASSWORD"] != ordersPassword ||
		!strings.HasPrefix(conn["REDIS_URL"], "redis://orders:") || conn["REDIS_HOST"] != "shop."+ns+".svc" {
		t.Errorf("the connection Secret shop-app-orders holds %v", conn)
	}
	stored := secretData(t, ns, "shop-users")
	for _, pw := range []string{ordersPassword, `r"e ad\er`} {
		if strings.Contains(stored["users.acl"]+stored["state.json"], pw) {
			t.Errorf("the Secret shop-users holds a password in clear: %q", stored)
		}
	}

	// The rules, as the server applies them.
	ordersClient := userClient(addr, "orders", ordersPassword)
	defer func() { _ = ordersClient.Close() }()
	held := ordersClient.Conn()
	defer func() { _ = held.Close() }()
	if err := held.Set(ctx, "orders:1", "v", 0).Err(); err != nil {
		t.Fatalf("orders writes its keys: %v", err)
	}
	for _, cmd := range [][]any{{"SET", "users:1", "v"}, {"FLUSHALL"}} {
		if err := held.Process(ctx, redis.NewCmd(ctx, cmd...)); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("orders %v: %v, want NOPERM", cmd, err)
		}
	}
	readerClient := userClient(addr, "reader", `r"e ad\er`)
	defer func() { _ = readerClient.Close() }()
	readerConn := readerClient.Conn()
	defer func() { _ = readerConn.Close() }()
	if got, err := readerConn.Get(ctx, "orders:1").Result(); err != nil || got != "v" {
		t.Errorf("reader GET orders:1: %q, %v", got, err)
	}
	if err := readerConn.Set(ctx, "orders:2", "v", 0).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("reader SET: %v, want NOPERM", err)
	}

	// Rotation: the new password works at once, the previous one for the
	// grace period, and the connected client throughout.
	generated.Data["password"] = []byte("the-new-orders-password")
	updated := time.Now()
	if err := k8s.Update(ctx, generated); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error { return signIn(addr, "orders", "the-new-orders-password") })
	// The operator records until when the previous password works: the
	// grace period (8 s) from the moment it saw the new one, in whole seconds.
	var state specs.UsersState
	if err := json.Unmarshal([]byte(secretData(t, ns, "shop-users")[specs.UsersStateKey]), &state); err != nil {
		t.Fatal(err)
	}
	if len(state["orders"].Previous) != 1 {
		t.Fatalf("the users' state after the rotation: %+v, want one previous password of orders", state["orders"])
	}
	until := state["orders"].Previous[0].Until.Time
	if earliest := updated.Add(7 * time.Second); until.Before(earliest) {
		t.Errorf("the previous password works until %s, less than the 8s grace period after the change at %s", until, updated)
	}
	if err := signIn(addr, "orders", ordersPassword); err != nil && time.Now().Before(until) {
		t.Errorf("the previous password is refused within the grace period: %v", err)
	}
	eventually(t, 30*time.Second, func() error {
		if err := signIn(addr, "orders", ordersPassword); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
			return fmt.Errorf("the previous password, %s after its deadline: %w", time.Since(until).Round(time.Second), err)
		}
		return nil
	})
	if refused := time.Now(); refused.Before(until) {
		t.Errorf("the previous password stopped working at %s, before its deadline %s", refused, until)
	}
	if err := held.Set(ctx, "orders:3", "v", 0).Err(); err != nil {
		t.Errorf("the connected client after the rotation: %v", err)
	}
	eventually(t, 30*time.Second, func() error {
		if got := secretData(t, ns, "shop-app-orders")["REDIS_PASSWORD"]; got != "the-new-orders-password" {
			return fmt.Errorf("the connection Secret holds %q", got)
		}
		return nil
	})
	waitEvent(t, ns, "shop", "RotatedPassword")

	// A rule the server refuses: its error, and the user keeps its rules.
	updateRP(t, ns, "shop", func(rp *v1alpha1.RedisPersistence) { rp.Spec.Users[0].Commands = []string{"+nosuchcommand"} })
	rp := waitCondition(t, ns, "shop", v1alpha1.ConditionUsersReady, metav1.ConditionFalse, ReasonUserRulesRefused)
	if msg := conditionMessage(rp, v1alpha1.ConditionUsersReady); !strings.Contains(msg, "user orders") || !strings.Contains(msg, "nosuchcommand") {
		t.Errorf("UsersReady says %q, want the server's error about orders' rule", msg)
	}
	if err := held.Set(ctx, "orders:4", "v", 0).Err(); err != nil {
		t.Errorf("orders lost its rules to a refused change: %v", err)
	}

	// Disabled: refused and disconnected. Removed, and hand-made: gone.
	if _, err := admin.Do(ctx, "ACL", "SETUSER", "by-hand", "on", ">pw", "+@all", "~*").Result(); err != nil {
		t.Fatal(err)
	}
	updateRP(t, ns, "shop", func(rp *v1alpha1.RedisPersistence) {
		rp.Spec.Users = []v1alpha1.UserSpec{reader}
		rp.Spec.Users[0].Enabled = ptr.To(false)
	})
	waitCondition(t, ns, "shop", v1alpha1.ConditionUsersReady, metav1.ConditionTrue, ReasonUsersApplied)
	if users := admin.Do(ctx, "ACL", "USERS").Val(); strings.Contains(fmt.Sprint(users), "orders") || strings.Contains(fmt.Sprint(users), "by-hand") {
		t.Errorf("ACL USERS %v after orders was removed and by-hand made", users)
	}
	if err := signIn(addr, "reader", `r"e ad\er`); err == nil {
		t.Error("the disabled user signs in")
	}
	if err := readerConn.Ping(ctx).Err(); err == nil {
		t.Error("the disabled user's connection stays open")
	}
	eventually(t, 30*time.Second, func() error {
		if err := get(t, &corev1.Secret{}, ns, "shop-app-orders"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the removed user's connection Secret: %w", err)
		}
		return nil
	})
	if err := get(t, &corev1.Secret{}, ns, "shop-user-orders"); err != nil {
		t.Errorf("the removed user's generated password went: %v", err)
	}

	// A server started again reads the users from shop-users.
	updateRP(t, ns, "shop", func(rp *v1alpha1.RedisPersistence) { rp.Spec.Users[0].Enabled = nil })
	eventually(t, 30*time.Second, func() error { return signIn(addr, "reader", `r"e ad\er`) })
	restarted := testenv.StartServer(t, renderedConfig(t, ns, "shop"))
	if err := signIn(restarted, "reader", `r"e ad\er`); err != nil {
		t.Errorf("a server started from the Secret shop-users: reader: %v", err)
	}
	if serverRunID(t, admin) != runID {
		t.Error("the server restarted")
	}
}

func serverRunID(t *testing.T, c *redis.Client) string {
	t.Helper()
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "run_id:"); ok {
			return v
		}
	}
	t.Fatal("INFO server has no run_id")
	return ""
}

func conditionMessage(rp *v1alpha1.RedisPersistence, condType string) string {
	for _, c := range rp.Status.Conditions {
		if c.Type == condType {
			return c.Message
		}
	}
	return ""
}

// TestUsersOnEveryServer: a replicated instance's users are on every
// server, the replica's too (ACL is not replicated), so a Sentinel-promoted
// replica serves them.
func TestUsersOnEveryServer(t *testing.T) {
	ensureNodes(t)
	ns := newNamespace(t)
	const name = "ledger"
	createVolumeFor(t, ns, "data-"+name+"-1")
	deleteAtEnd(t, createRP(t, ns, name, v1alpha1.RedisPersistenceSpec{
		Mode: v1alpha1.ModeAOF, AOF: &v1alpha1.AOFSpec{Fsync: v1alpha1.FsyncAlways},
		Replicas: 2, Sentinel: &v1alpha1.SentinelSpec{Count: 2, Quorum: 1},
		Users: []v1alpha1.UserSpec{{Name: "app", Keys: []string{"app:*"}, Commands: []string{"+@read", "+@write"}}},
	}))
	waitCondition(t, ns, name, v1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled)
	primary, replica := runPrimaryAndReplica(t, ns, name)
	for i := range 2 {
		sentinelAddrs.Store(fmt.Sprintf("%s/%s-sentinel-%d", ns, name, i), "192.0.2.1:26379") // TEST-NET-1: nothing answers
		markRunning(t, ns, fmt.Sprintf("%s-sentinel-%d", name, i))
	}
	eventually(t, 30*time.Second, func() error {
		rp := waitCondition(t, ns, name, v1alpha1.ConditionUsersReady, metav1.ConditionTrue, ReasonUsersApplied)
		if msg := conditionMessage(rp, v1alpha1.ConditionUsersReady); !strings.Contains(msg, "on 2 running server") {
			return fmt.Errorf("UsersReady says %q, want both servers", msg)
		}
		return nil
	})
	appPassword := secretData(t, ns, name+"-user-app")["password"]
	for _, addr := range []string{primary, replica} {
		if err := signIn(addr, "app", appPassword); err != nil {
			t.Errorf("app signs in at %s: %v", addr, err)
		}
	}
}
