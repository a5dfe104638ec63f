package controllers

import "testing"

func TestParseServerInfo(t *testing.T) {
	cases := []struct {
		desc, info string
		want       serverInfo
	}{
		{"uring active", "# Persistence\r\naof_enabled:1\r\naof_engine:uring\r\naof_uring_active:1\r\naof_uring_fallback_reason:none\r\n",
			serverInfo{aofEnabled: true, engine: "uring", uringActive: true, fallbackReason: "none"}},
		{"uring fell back", "aof_enabled:1\r\naof_engine:uring\r\naof_uring_active:0\r\naof_uring_fallback_reason:io_uring_setup_eperm\r\n",
			serverInfo{aofEnabled: true, engine: "posix", fallbackReason: "io_uring_setup_eperm"}},
		{"stock server", "aof_enabled:1\r\naof_rewrite_in_progress:0\r\n", serverInfo{aofEnabled: true, engine: "posix"}},
		{"no aof", "aof_enabled:0\r\naof_engine:posix\r\n", serverInfo{}},
	}
	for _, tc := range cases {
		if got := *parseServerInfo(tc.info); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.desc, got, tc.want)
		}
	}
}
