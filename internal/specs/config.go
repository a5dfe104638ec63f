package specs

import (
	"cmp"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// RenderConfig renders redis.conf: what the server reads only at start, then
// the options the operator also sets on the running server (RuntimeSettings).
// Every persistence knob is written out, defaults included, so the file alone
// says what the server does after a restart.
func RenderConfig(rp *v1alpha1.RedisPersistence) string {
	var b strings.Builder
	b.WriteString(startupConfig(rp))
	b.WriteString("# Runtime options: the operator applies changes to them with CONFIG SET, without a restart.\n")
	for _, s := range RuntimeSettings(rp) {
		if s.Implicit {
			continue
		}
		value := s.Value
		switch {
		case s.user:
			value = ConfigValue(value)
		case value == "":
			value = `""`
		}
		fmt.Fprintf(&b, "%s %s\n", s.Name, value)
	}
	return b.String()
}

// startupConfig is the part of redis.conf the server reads only at start: a
// change to it restarts the pod (ConfigHash).
func startupConfig(rp *v1alpha1.RedisPersistence) string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }

	line("# Rendered by uring-redis-operator from RedisPersistence %s/%s (mode %s); do not edit.", rp.Namespace, rp.Name, rp.Spec.Mode)
	line("bind * -::*")
	if TLSEnabled(rp) {
		for _, l := range TLSServerConfig(rp, RedisPort) {
			line("%s", l)
		}
	} else {
		line("port %d", RedisPort)
	}
	line("protected-mode no")
	line("dir %s", DataDir)
	line("daemonize no")
	line("loglevel notice")
	line(`logfile ""`)
	// DEBUG only where the owner allowed a RedisBenchmark's crash check,
	// which kills the server with DEBUG SEGFAULT.
	line("enable-debug-command %s", yesNo(rp.Spec.Benchmark != nil && rp.Spec.Benchmark.CrashCheck))
	line("dbfilename dump.rdb")
	line("appenddirname appendonlydir")
	for _, l := range clusterConfig(rp) {
		line("%s", l)
	}
	if AuthSecretRef(rp) != nil {
		line("include %s/auth.conf", RunDir)
	}
	for _, name := range slices.Sorted(maps.Keys(rp.Spec.Config)) {
		if startupOnlyOptions[name] {
			line("%s %s", name, ConfigValue(string(rp.Spec.Config[name])))
		}
	}
	return b.String()
}

// startupOnlyOptions are the server options spec.config may set that Valkey
// 8.1.1 takes only at start (IMMUTABLE_CONFIG, or PROTECTED_CONFIG, which
// CONFIG SET refuses while enable-protected-configs is no): they go to the
// part of redis.conf whose change restarts the server. The operator's own
// options (the CRD's denylist, which holds every cluster-* option: a server
// in cluster mode serves no key until the operator assigns it slots) are not
// listed.
var startupOnlyOptions = map[string]bool{
	"always-show-logo": true, "aof-rewrite-cpulist": true, "bgsave-cpulist": true, "bio-cpulist": true,
	"client-default-resp": true, "databases": true, "disable-thp": true, "enable-debug-assert": true, "io-threads": true,
	"lua-enable-insecure-api": true, "rdbchecksum": true, "rdma-completion-vector": true, "rdma-rx-size": true,
	"req-res-logfile": true, "server-cpulist": true, "set-proc-title": true, "socket-mark-id": true,
	"syslog-enabled": true, "syslog-facility": true, "syslog-ident": true, "tcp-backlog": true,
}

// ConfigValue writes a spec.config value as one redis.conf argument: bare
// when it is a plain word, else double-quoted with the escapes the server's
// config parser (sdssplitargs) reads back. A multi-argument option given as
// one quoted argument is split on spaces by the server.
func ConfigValue(v string) string {
	plain := func(r rune) bool {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:/+,@%", r)
	}
	if v != "" && !strings.ContainsFunc(v, func(r rune) bool { return !plain(r) }) {
		return v
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", `\r`, "\t", `\t`).Replace(v) + `"`
}

// maxmemoryShare is the part of the memory limit a server gets as maxmemory
// when spec.config does not set it. maxmemory counts the dataset, not what
// the process needs beside it: the pages a snapshot or AOF rewrite child
// copies on write (up to the whole dataset under heavy writes, a fraction
// under most loads), the AOF buffer and the io_uring engine's batches in
// flight and the replies the durable gate holds (both left out of maxmemory
// by the server), client buffers and allocator fragmentation. 30% of the
// limit is room for those under moderate write load; the limit itself is
// what the kernel OOM-kills at.
const maxmemoryShare = 0.7

// defaultMaxmemory is the maxmemory a memory limit implies, or "" without one.
func defaultMaxmemory(rp *v1alpha1.RedisPersistence) string {
	if rp.Spec.Resources == nil {
		return ""
	}
	limit, ok := rp.Spec.Resources.Limits[corev1.ResourceMemory]
	if !ok || limit.IsZero() {
		return ""
	}
	return strconv.FormatInt(int64(float64(limit.Value())*maxmemoryShare), 10)
}

// ServerSetting is one server option the server can change at runtime.
type ServerSetting struct {
	Name, Value string
	// Implicit marks the server's default, left out of redis.conf so modes
	// other than uring run on a stock Valkey or Redis image; it is set only
	// on a server that knows the option.
	Implicit bool
	// user marks an option from spec.config, written to redis.conf with ConfigValue.
	user bool
}

// RuntimeSettings are the options the running server takes with CONFIG SET,
// in the order they are applied: appendonly last, so that an AOF a mode change
// starts is written with the policy and engine already in place.
func RuntimeSettings(rp *v1alpha1.RedisPersistence) []ServerSetting {
	settings := []ServerSetting{{Name: "save", Value: SaveRules(rp)}}
	appendonly := "no"
	switch rp.Spec.Mode {
	case v1alpha1.ModeAOF:
		fsync := v1alpha1.FsyncEverySec
		if rp.Spec.AOF != nil && rp.Spec.AOF.Fsync != "" {
			fsync = rp.Spec.AOF.Fsync
		}
		appendonly = "yes"
		settings = append(settings,
			ServerSetting{Name: "appendfsync", Value: string(fsync)},
			ServerSetting{Name: "appendfsync-engine", Value: "posix", Implicit: true})
	case v1alpha1.ModeUring:
		u := rp.Spec.Uring
		if u == nil {
			u = &v1alpha1.UringSpec{}
		}
		appendonly = "yes"
		sqpoll := u.SQPoll != nil && u.SQPoll.Enabled
		// The uring engine syncs every batch; "always" is the policy whose
		// guarantee it keeps, and what the server runs if the ring cannot start.
		settings = append(settings,
			ServerSetting{Name: "appendfsync", Value: "always"},
			ServerSetting{Name: "appendfsync-engine", Value: "uring"},
			ServerSetting{Name: "aof-uring-ack", Value: cmp.Or(string(u.Ack), string(v1alpha1.AckDurable))},
			ServerSetting{Name: "aof-uring-queue-depth", Value: strconv.Itoa(int(cmp.Or(u.QueueDepth, 256)))},
			ServerSetting{Name: "aof-uring-sqpoll", Value: yesNo(sqpoll)},
			// Off is the server's default and left implicit, so a uring
			// image from before io-uring-replies still starts.
			ServerSetting{Name: "io-uring-replies", Value: yesNo(u.Replies), Implicit: !u.Replies},
			// 0 is the default and left implicit likewise. Every server of a
			// replicated instance carries it: a replica ignores it until the
			// Sentinels promote it.
			ServerSetting{Name: "aof-uring-ack-replicas", Value: strconv.Itoa(int(u.AckReplicas)), Implicit: u.AckReplicas == 0})
		if sqpoll && u.SQPoll.IdleMillis != nil {
			settings = append(settings, ServerSetting{Name: "aof-uring-sqpoll-idle-ms", Value: strconv.Itoa(int(*u.SQPoll.IdleMillis))})
		}
		if sqpoll && u.SQPoll.CPU != nil {
			settings = append(settings, ServerSetting{Name: "aof-uring-sqpoll-cpu", Value: strconv.Itoa(int(*u.SQPoll.CPU))})
		}
		settings = append(settings, ServerSetting{Name: "aof-uring-max-workers", Value: strconv.Itoa(int(cmp.Or(u.MaxWorkers, 2)))})
		// The server's defaults (one batch in flight, direct writes on) are
		// left implicit, so an older uring image that lacks an option starts.
		direct := u.DirectWrites == nil || *u.DirectWrites
		settings = append(settings,
			ServerSetting{Name: "aof-uring-fsyncs-in-flight", Value: strconv.Itoa(int(max(u.BatchesInFlight, 1))), Implicit: u.BatchesInFlight <= 1},
			ServerSetting{Name: "aof-uring-direct-writes", Value: yesNo(direct), Implicit: direct})
		if u.MaxInFlight != nil {
			settings = append(settings, ServerSetting{Name: "aof-uring-max-inflight-bytes", Value: strconv.FormatInt(u.MaxInFlight.Value(), 10)})
		}
	default:
		settings = append(settings, ServerSetting{Name: "appendfsync-engine", Value: "posix", Implicit: true})
	}
	if rp.Spec.Mode.KeepsAOF() {
		// The archive is cut at the AOF's #TS annotations (a point-in-time
		// recovery); off, the server's default, is left implicit.
		archive := ArchiveEnabled(rp)
		settings = append(settings, ServerSetting{Name: "aof-timestamp-enabled", Value: yesNo(archive), Implicit: !archive})
	}
	if _, set := rp.Spec.Config["maxmemory"]; !set {
		if maxmemory := defaultMaxmemory(rp); maxmemory != "" {
			settings = append(settings, ServerSetting{Name: "maxmemory", Value: maxmemory})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(rp.Spec.Config)) {
		if !startupOnlyOptions[name] {
			settings = append(settings, ServerSetting{Name: name, Value: string(rp.Spec.Config[name]), user: true})
		}
	}
	return append(settings, ServerSetting{Name: "appendonly", Value: appendonly})
}

// SaveRules is the value of the save option: the snapshot rules, or "" for none.
func SaveRules(rp *v1alpha1.RedisPersistence) string {
	if rp.Spec.RDB == nil {
		return ""
	}
	rules := make([]string, 0, len(rp.Spec.RDB.Save))
	for _, r := range rp.Spec.RDB.Save {
		rules = append(rules, fmt.Sprintf("%d %d", r.Seconds, r.Changes))
	}
	return strings.Join(rules, " ")
}

// RuntimeConfigHash identifies the runtime options; status.appliedConfigHash
// carries it once the running server has them.
func RuntimeConfigHash(rp *v1alpha1.RedisPersistence) string {
	var b strings.Builder
	for _, s := range RuntimeSettings(rp) {
		fmt.Fprintf(&b, "%s=%s\n", s.Name, s.Value)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:8])
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// ConfigHash changes whenever the pods must restart to pick up a change the
// pod template itself does not show: the startup part of redis.conf and the
// exporter's script. The runtime options are left out; the operator sets them
// on the running server.
func ConfigHash(rp *v1alpha1.RedisPersistence) string {
	sum := sha256.Sum256([]byte(startupConfig(rp) + ExporterScript))
	return hex.EncodeToString(sum[:8])
}

// AuthHash is "" for a server without a password, and otherwise changes only
// when the Secret key the password comes from does, so the pods restart
// then. A new password in the same Secret does not restart anything: the
// operator rotates it on the running servers and Sentinels
// (controllers/redispersistence_password.go), and a container that starts
// later reads the new one. Salted with the RedisPersistence's UID.
func AuthHash(rp *v1alpha1.RedisPersistence, password string) string {
	ref := AuthSecretRef(rp)
	if password == "" || ref == nil {
		return ""
	}
	sum := sha256.Sum256([]byte(string(rp.UID) + "\x00" + ref.Name + "\x00" + ref.Key))
	return hex.EncodeToString(sum[:8])
}

func ConfigMap(rp *v1alpha1.RedisPersistence, config string) *corev1.ConfigMap {
	meta := ObjectMeta(rp, ConfigMapName(rp))
	meta.Annotations = map[string]string{AnnotationMode: string(rp.Spec.Mode), AnnotationRuntimeConfigHash: RuntimeConfigHash(rp)}
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta,
		Data:       map[string]string{"redis.conf": config, ExporterScriptFile: ExporterScript},
	}
}
