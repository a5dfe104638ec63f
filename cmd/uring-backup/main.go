// Command uring-backup is the backup agent the operator runs in RedisBackup
// Jobs, from its own image.
//
//	uring-backup take --source=host:port --backup=NAME --endpoint=URL --bucket=B [flags]
//
// take streams a snapshot (an RDB, as a replica receives it) of the server
// at --source into the object store, checked on the way (the RDB's own
// CRC-64 and a SHA-256 of what was stored), writes the backup's metadata
// beside it and prints that metadata, which it also writes as the
// container's termination message for the operator to collect. It signs in
// to the server as $REDIS_USER with $REDIS_PASSWORD and to the store with
// $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY. On an error it prints the
// error last and exits 1: the Job runs a new pod, which starts over.
//
//	uring-backup archive --source=host:port --data-dir=/data --interval=30s --endpoint=URL --bucket=B [flags]
//
// archive runs beside a server, on its volume, until SIGTERM: every
// --interval, while the server is a primary, it ships the AOF's new bases
// and the new complete entries of its INCR files under
// <prefix>/archive/<timeline>/ (backup.Archiver; the package comment's
// "Continuous archiving" describes what and why). On SIGTERM it makes a
// last pass and exits 0; a failed pass is logged and retried. It signs in
// as take does, and needs INFO only.
//
//	uring-backup restore --backup=NAME --data-dir=/data --aof=true --endpoint=URL [flags]
//
// restore runs before a server's first start (spec.bootstrap.recovery): it
// downloads the snapshot at $RESTORE_LOCATION, checks it against
// $RESTORE_SHA256 and its own checksum, and puts it where the server loads
// it (backup.Restore). With $RESTORE_ARCHIVE (s3://<bucket>/<prefix> of
// the archived instance) it restores the archive instead, to
// $RESTORE_TARGET_TIME (RFC 3339; empty: the latest archived), as an AOF
// (backup.ArchiveRestore); --backup is not needed then. Without either, or
// on a pod other than ordinal 0 with --ordinal-zero-only, it does nothing:
// the operator removes the location once the restored server is Ready, and
// replicas copy the data from ordinal 0. On a volume that holds data it
// fails, saying so.
//
//	uring-backup list --endpoint=URL --bucket=B --prefix=P [--json]
//
// list prints the backups the store holds under <prefix>/backups/, newest
// first: what `spec.bootstrap.recovery.storedBackup` can restore when the
// RedisBackup objects are gone. It reads each backup.json, nothing else,
// and signs in to the store as take does.
package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/uring-redis/uring-redis-operator/internal/backup"
	"github.com/uring-redis/uring-redis-operator/internal/tlsclient"
)

func main() {
	commands := map[string]func(context.Context, []string) error{"take": take, "restore": restore, "archive": archive,
		"list": func(ctx context.Context, args []string) error { return list(ctx, args, os.Stdout) }}
	var command func(context.Context, []string) error
	if len(os.Args) >= 2 {
		command = commands[os.Args[1]]
	}
	if command == nil {
		fmt.Fprintln(os.Stderr, "usage: uring-backup take|archive|restore|list [flags]; uring-backup take -h lists take's")
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	err := command(ctx, os.Args[2:])
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "uring-backup:", err)
		os.Exit(1)
	}
}

func take(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("take", flag.ExitOnError)
	var (
		t                      backup.Take
		tlsCA, tlsCert, tlsKey string
		storeCA, termPath      string
	)
	fs.StringVar(&t.Source.Addr, "source", "", "Server to take the snapshot from, host:port.")
	fs.StringVar(&t.SourcePod, "source-pod", "", "The server's pod, recorded in the metadata.")
	fs.StringVar(&t.Backup, "backup", "", "The backup's name: its objects go under <prefix>/backups/<name>/.")
	fs.StringVar(&t.Instance, "instance", "", "The RedisPersistence, recorded in the metadata.")
	fs.StringVar(&t.Mode, "mode", "", "Its spec.mode, recorded in the metadata.")
	fs.IntVar(&t.SampleKeys, "sample-keys", 0, fmt.Sprintf("How many keys of the snapshot backup.json records for a verification (at most %d); the keys are counted anyway.", backup.MaxSampleKeys))
	destinationFlags(fs, &t.Destination, &storeCA)
	sourceTLSFlags(fs, &tlsCA, &tlsCert, &tlsKey)
	fs.StringVar(&termPath, "termination-log", "/dev/termination-log", "Where the metadata is written for the operator; empty to skip.")
	_ = fs.Parse(args)
	if t.Source.Addr == "" || t.Backup == "" || t.Destination.Endpoint == "" || t.Destination.Bucket == "" {
		return errors.New("--source, --backup, --endpoint and --bucket are required")
	}
	t.Namespace = os.Getenv("POD_NAMESPACE")
	if err := signIn(&t.Source, &t.Destination, storeCA, tlsCA, tlsCert, tlsKey); err != nil {
		return err
	}
	m, err := t.Run(ctx)
	if err != nil {
		return err
	}
	out, err := m.Encode()
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	if termPath != "" {
		return os.WriteFile(termPath, out, 0o644)
	}
	return nil
}

// destinationFlags are the store's flags, as take and archive get them.
// list prints the store's backups under --prefix, newest first, as a
// table or, with --json, as their metadata.
func list(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("list", flag.ExitOnError)
	var (
		d       backup.Destination
		storeCA string
		asJSON  bool
	)
	destinationFlags(fs, &d, &storeCA)
	fs.BoolVar(&asJSON, "json", false, "Print each backup's metadata (backup.json) as a JSON array.")
	_ = fs.Parse(args)
	if d.Endpoint == "" || d.Bucket == "" || d.Prefix == "" {
		return errors.New("--endpoint, --bucket and --prefix (the backed-up instance's spec.backup.destination.s3.path, or <namespace>/<name>) are required")
	}
	if err := signInToStore(&d, storeCA); err != nil {
		return err
	}
	store, err := backup.Open(ctx, d)
	if err != nil {
		return err
	}
	backups, err := backup.Backups(ctx, store)
	if err != nil {
		return err
	}
	sort.SliceStable(backups, func(i, j int) bool { return backups[i].Point.After(backups[j].Point) })
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(append([]backup.Metadata{}, backups...))
	}
	if len(backups) == 0 {
		_, err := fmt.Fprintf(out, "no backup under %s\n", store.URL("backups/"))
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(w, "NAME\tPOINT\tINSTANCE\tMODE\tSIZE\tLOCATION")
	for _, m := range backups {
		_, _ = fmt.Fprintf(w, "%s\t%s\t%s/%s\t%s\t%d\t%s\n", m.Backup, m.Point.UTC().Format(time.RFC3339), m.Namespace, m.Instance, cmp.Or(m.Mode, "-"), m.Size, m.Location)
	}
	return w.Flush()
}

func destinationFlags(fs *flag.FlagSet, d *backup.Destination, storeCA *string) {
	fs.StringVar(&d.Endpoint, "endpoint", "", "Object store URL, http(s)://host[:port].")
	fs.StringVar(&d.Bucket, "bucket", "", "Bucket.")
	fs.StringVar(&d.Prefix, "prefix", "", "Prefix of the instance's objects in the bucket.")
	fs.StringVar(&d.Region, "region", "us-east-1", "The bucket's region.")
	fs.StringVar(&d.SSE, "sse", "", "Server-side encryption: empty or AES256.")
	fs.StringVar(storeCA, "store-ca-file", "", "PEM CA the store's certificate must chain to; empty trusts the system's.")
	fs.Func("compression", "What snapshots and archive segments are compressed with: none or zstd.", func(s string) error {
		c, err := backup.ParseCompression(s)
		d.Compression = c
		return err
	})
}

// sourceTLSFlags are the flags that reach the server over TLS.
func sourceTLSFlags(fs *flag.FlagSet, ca, cert, key *string) {
	fs.StringVar(ca, "tls-ca-cert", "", "CA certificate file: reach the server over TLS, verifying its certificate against it.")
	fs.StringVar(cert, "tls-cert", "", "Client certificate file, for a server that requires one (with --tls-key).")
	fs.StringVar(key, "tls-key", "", "Client key file.")
}

// signIn gives src the user in $REDIS_USER and $REDIS_PASSWORD and the
// TLS files, and d the store's credentials and CA.
func signIn(src *backup.Source, d *backup.Destination, storeCA, tlsCA, tlsCert, tlsKey string) error {
	src.Username, src.Password = os.Getenv("REDIS_USER"), os.Getenv("REDIS_PASSWORD")
	if err := signInToStore(d, storeCA); err != nil {
		return err
	}
	if tlsCA == "" {
		return nil
	}
	config, err := loadTLS(tlsCA, tlsCert, tlsKey)
	if err != nil {
		return err
	}
	src.TLS = config
	return nil
}

func archive(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("archive", flag.ExitOnError)
	var (
		a                      backup.Archiver
		tlsCA, tlsCert, tlsKey string
		storeCA                string
	)
	fs.StringVar(&a.Source.Addr, "source", "", "The server beside the agent, host:port.")
	fs.StringVar(&a.DataDir, "data-dir", "/data", "The server's data directory, where appendonlydir is.")
	fs.DurationVar(&a.Interval, "interval", 30*time.Second, "Time between passes: the most of the log a lost volume takes with it.")
	fs.DurationVar(&a.MaxAge, "max-age", 0, "Let go of what only a recovery to a point older than this needs, with or without backups in the store; 0: keep what a recovery to the oldest backup's point or later needs, and everything while there is no backup.")
	fs.DurationVar(&a.PruneEvery, "prune-every", 10*time.Minute, "How often a pass also prunes the archive.")
	destinationFlags(fs, &a.Destination, &storeCA)
	sourceTLSFlags(fs, &tlsCA, &tlsCert, &tlsKey)
	_ = fs.Parse(args)
	if a.Source.Addr == "" || a.Destination.Endpoint == "" || a.Destination.Bucket == "" {
		return errors.New("--source, --endpoint and --bucket are required")
	}
	if a.Interval <= 0 || a.PruneEvery <= 0 || a.MaxAge < 0 {
		return fmt.Errorf("--interval %s, --prune-every %s, --max-age %s: want positive durations (--max-age 0 too)", a.Interval, a.PruneEvery, a.MaxAge)
	}
	if err := signIn(&a.Source, &a.Destination, storeCA, tlsCA, tlsCert, tlsKey); err != nil {
		return err
	}
	if err := a.Run(ctx); err != nil {
		// The pod is stopping: the next start of the archiver on this
		// volume ships what this pass did not.
		fmt.Fprintln(os.Stderr, "uring-backup: the last pass before stopping failed:", err)
	}
	return nil
}

func restore(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("restore", flag.ExitOnError)
	var (
		r                  backup.Restore
		storeCA            string
		ordinalZeroOnly    bool
		ignoredBucket      string
		ignoredPrefix      string
		ignoredEncryption  string
		ignoredCompression string
	)
	fs.StringVar(&r.Backup, "backup", "", "The backup's name, recorded in the volume.")
	fs.StringVar(&r.DataDir, "data-dir", "/data", "The server's data directory.")
	fs.BoolVar(&r.AOF, "aof", true, "The server loads an AOF: restore the snapshot as its base; false: as dump.rdb.")
	fs.BoolVar(&ordinalZeroOnly, "ordinal-zero-only", false, "Do nothing unless this pod's name ends in -0.")
	fs.StringVar(&r.Destination.Endpoint, "endpoint", "", "Object store URL, http(s)://host[:port].")
	fs.StringVar(&r.Destination.Region, "region", "us-east-1", "The bucket's region.")
	fs.StringVar(&storeCA, "store-ca-file", "", "PEM CA the store's certificate must chain to; empty trusts the system's.")
	// The instance's destination flags, as take gets them: the snapshot's
	// own location names its bucket and key, the archive's its bucket and
	// prefix.
	fs.StringVar(&ignoredBucket, "bucket", "", "Ignored: $RESTORE_LOCATION or $RESTORE_ARCHIVE names the bucket.")
	fs.StringVar(&ignoredPrefix, "prefix", "", "Ignored: $RESTORE_LOCATION or $RESTORE_ARCHIVE names the key or prefix.")
	fs.StringVar(&ignoredEncryption, "sse", "", "Ignored: the store decrypts what it encrypted.")
	fs.StringVar(&ignoredCompression, "compression", "", "Ignored: what is read says how it is compressed.")
	_ = fs.Parse(args)
	r.Location, r.SHA256 = os.Getenv("RESTORE_LOCATION"), os.Getenv("RESTORE_SHA256")
	if r.Backup == "" {
		// spec.bootstrap.recovery.storedBackup: the operator names the
		// backup it found in the store.
		r.Backup = os.Getenv("RESTORE_BACKUP")
	}
	// The kubelet sets HOSTNAME to the pod's name.
	host := os.Getenv("HOSTNAME")
	if host == "" {
		host, _ = os.Hostname()
	}
	if ordinalZeroOnly && !strings.HasSuffix(host, "-0") {
		fmt.Printf("uring-backup: %s is not ordinal 0; it copies the data from there\n", host)
		return nil
	}
	if location := os.Getenv("RESTORE_ARCHIVE"); location != "" {
		return restoreArchive(ctx, r, location, storeCA)
	}
	if r.Location == "" {
		fmt.Println("uring-backup: nothing to restore (no $RESTORE_LOCATION or $RESTORE_ARCHIVE)")
		return nil
	}
	if r.SHA256 == "" || r.Backup == "" || r.Destination.Endpoint == "" {
		return errors.New("$RESTORE_SHA256, --backup and --endpoint are required with $RESTORE_LOCATION")
	}
	if err := signInToStore(&r.Destination, storeCA); err != nil {
		return err
	}
	restored, err := r.Run(ctx)
	if err != nil {
		return err
	}
	if restored {
		fmt.Printf("uring-backup: restored backup %s (%s, sha256 %s) into %s\n", r.Backup, r.Location, r.SHA256, r.DataDir)
	} else {
		fmt.Printf("uring-backup: backup %s was restored here before\n", r.Backup)
	}
	return nil
}

// restoreArchive restores the archive at location (backup.ArchiveRestore)
// to $RESTORE_TARGET_TIME, or to the latest archived without it, with the
// store and data directory restore's flags give r.
func restoreArchive(ctx context.Context, r backup.Restore, location, storeCA string) error {
	a := backup.ArchiveRestore{Destination: r.Destination, Location: location, DataDir: r.DataDir}
	if target := os.Getenv("RESTORE_TARGET_TIME"); target != "" {
		t, err := time.Parse(time.RFC3339, target)
		if err != nil {
			return fmt.Errorf("$RESTORE_TARGET_TIME %q is no RFC 3339 time (2006-01-02T15:04:05Z): %w", target, err)
		}
		a.Target = t
	}
	if !r.AOF {
		return errors.New("a restore from the archive writes an AOF: the server must load one (--aof=true, appendonly yes)")
	}
	if a.Destination.Endpoint == "" {
		return errors.New("--endpoint is required with $RESTORE_ARCHIVE")
	}
	if err := signInToStore(&a.Destination, storeCA); err != nil {
		return err
	}
	restored, err := a.Run(ctx)
	target := cmp.Or(os.Getenv("RESTORE_TARGET_TIME"), "the latest archived")
	switch {
	case err != nil:
		return err
	case restored:
		fmt.Printf("uring-backup: restored the archive %s at %s into %s\n", location, target, a.DataDir)
	default:
		fmt.Printf("uring-backup: the archive %s at %s was restored here before\n", location, target)
	}
	return nil
}

// signInToStore gives d the access key in $AWS_ACCESS_KEY_ID and
// $AWS_SECRET_ACCESS_KEY and the CA in caFile, if any.
func signInToStore(d *backup.Destination, caFile string) error {
	d.AccessKey, d.SecretKey = os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if caFile == "" {
		return nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("the store's CA: %w", err)
	}
	d.CA = pem
	return nil
}

// loadTLS is the TLS configuration from the server Secret's files, mounted
// as the benchmark runner mounts them.
func loadTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	var pems [3][]byte
	for i, file := range []string{caFile, certFile, keyFile} {
		if file == "" {
			continue
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		pems[i] = b
	}
	return tlsclient.Config(pems[0], pems[1], pems[2])
}
