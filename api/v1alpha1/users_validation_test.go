package v1alpha1_test

import (
	"strings"
	"testing"
)

func withUsers(users ...any) map[string]any {
	return map[string]any{"mode": "aof", "users": users}
}

func TestUsersRejected(t *testing.T) {
	for _, tc := range []rejection{
		{"user named default", withUsers(map[string]any{"name": "default"}), "spec.users[].name cannot be default"},
		{"user named like the operator's", withUsers(map[string]any{"name": "uringredis-exporter"}), "or start with uringredis-"},
		{"user name in upper case", withUsers(map[string]any{"name": "Orders"}), "spec.users[0].name in body should match"},
		{"user name too long", withUsers(map[string]any{"name": strings.Repeat("a", 64)}), "spec.users[0].name: Too long"},
		{"two users of one name", withUsers(map[string]any{"name": "app"}, map[string]any{"name": "app"}), `spec.users[1]: Duplicate value: map[string]interface {}{"name":"app"}`},
		{"key pattern with a space", withUsers(map[string]any{"name": "app", "keys": []any{"app: *"}}), "spec.users[0].keys[0] in body should match"},
		{"command rule without a sign", withUsers(map[string]any{"name": "app", "commands": []any{"@read"}}), "spec.users[0].commands[0] in body should match"},
		{"command rule with a space", withUsers(map[string]any{"name": "app", "commands": []any{"+get ~*"}}), "spec.users[0].commands[0] in body should match"},
		{"raw ACL rule in commands", withUsers(map[string]any{"name": "app", "commands": []any{"nopass"}}), "spec.users[0].commands[0] in body should match"},
		{"negative grace period", map[string]any{"mode": "aof", "passwordGracePeriod": "-1m"}, "spec.passwordGracePeriod is a duration from 0s to 168h"},
		{"grace period over a week", map[string]any{"mode": "aof", "passwordGracePeriod": "169h"}, "spec.passwordGracePeriod is a duration from 0s to 168h"},
		{"grace period that is no duration", map[string]any{"mode": "aof", "passwordGracePeriod": "soon"}, "spec.passwordGracePeriod"},
	} {
		expectRejected(t, tc)
	}
}

func TestUsersAccepted(t *testing.T) {
	if err := create(map[string]any{
		"mode": "uring", "passwordGracePeriod": "0s",
		"users": []any{
			map[string]any{"name": "orders", "keys": []any{"orders:*", "carts:{*}"}, "channels": []any{"orders.*"},
				"commands": []any{"+@read", "+@write", "-@dangerous", "+config|get", "-flushall", "+client|setname"}},
			map[string]any{"name": "reports-2", "passwordSecretRef": map[string]any{"name": "reports", "key": "pw"}, "enabled": false},
		},
	}); err != nil {
		t.Fatal(err)
	}
}
