package controllers

import "testing"

func TestServerInfoFrom(t *testing.T) {
	cases := []struct {
		desc string
		info map[string]map[string]string
		want serverInfo
	}{
		{"uring active", map[string]map[string]string{
			"Server":      {"run_id": "5f1c"},
			"Persistence": {"aof_enabled": "1", "aof_engine": "uring", "aof_uring_active": "1", "aof_uring_fallback_reason": "none"},
		}, serverInfo{aofEnabled: true, engine: "uring", uringActive: true, fallbackReason: "none", runID: "5f1c"}},
		{"uring fell back", map[string]map[string]string{
			"Persistence": {"aof_enabled": "1", "aof_engine": "uring", "aof_uring_active": "0", "aof_uring_fallback_reason": "io_uring_setup_eperm"},
		}, serverInfo{aofEnabled: true, engine: "posix", fallbackReason: "io_uring_setup_eperm"}},
		{"stock server", map[string]map[string]string{
			"Persistence": {"aof_enabled": "1", "aof_rewrite_in_progress": "0"},
		}, serverInfo{aofEnabled: true, engine: "posix"}},
		{"no aof", map[string]map[string]string{
			"Persistence": {"aof_enabled": "0", "aof_engine": "posix"},
		}, serverInfo{}},
		{"snapshot state", map[string]map[string]string{
			"Persistence": {"aof_enabled": "0", "rdb_bgsave_in_progress": "1", "rdb_last_bgsave_status": "ok", "rdb_saves": "3"},
		}, serverInfo{bgsaveInProgress: true, lastBgsaveOK: true, rdbSaves: 3}},
		{"no reply", nil, serverInfo{}},
	}
	for _, tc := range cases {
		if got := *serverInfoFrom(tc.info); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.desc, got, tc.want)
		}
	}
}
