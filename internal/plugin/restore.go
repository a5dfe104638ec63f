package plugin

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// restoreSource is what a restore recovers: a RedisBackup, the archive up
// to a time, or the latest point the store holds.
type restoreSource struct {
	backup string
	time   *time.Time
	latest bool
}

func (r *root) restoreCommand() *cobra.Command {
	var (
		to, backup, at string
		latest, dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "restore NAME --to NEW (--backup BACKUP | --time RFC3339 | --latest) [--dry-run]",
		Short: "Create the RedisPersistence NEW that recovers a backup of NAME, or NAME's archive up to a time",
		Long: "restore creates a new RedisPersistence NEW with NAME's spec and a spec.bootstrap.recovery that\n" +
			"restores the RedisBackup --backup of NAME, or replays NAME's AOF archive up to --time; --latest\n" +
			"replays the archive to its end when NAME reports one, and restores NAME's newest Completed backup\n" +
			"otherwise. NEW reads the store with NAME's destination and keeps its own objects under\n" +
			"<namespace>/NEW in it.\n\n" +
			"It checks first what the operator would: that the backup is NAME's and Completed, or that\n" +
			"--time is inside the reach NAME's status.archive reports. The API server validates NEW too.\n" +
			"With --dry-run it prints NEW (YAML unless -o json) and creates nothing.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			source := restoreSource{backup: backup, latest: latest}
			switch {
			case countSet(backup != "", at != "", latest) != 1:
				return fmt.Errorf("restore needs one of --backup BACKUP (a Completed RedisBackup of %s), --time RFC3339 (a point its archive reaches) or --latest", args[0])
			case to == "":
				return fmt.Errorf("restore needs --to NEW: the name of the new RedisPersistence")
			case at != "":
				t, err := time.Parse(time.RFC3339, at)
				if err != nil {
					return fmt.Errorf("--time %q is not an RFC 3339 time such as 2026-11-27T06:30:00Z", at)
				}
				source.time = &t
			}
			c, namespace, err := r.client()
			if err != nil {
				return err
			}
			rp, err := planRestore(cmd.Context(), c, namespace, args[0], to, source)
			if err != nil {
				return err
			}
			opts := []client.CreateOption{client.FieldOwner(FieldOwner)}
			if dryRun {
				opts = append(opts, client.DryRunAll)
			}
			if err := c.Create(cmd.Context(), rp.DeepCopy(), opts...); err != nil {
				return fmt.Errorf("the API server refuses the RedisPersistence %s/%s: %w", namespace, to, err)
			}
			m, err := manifest(rp)
			if err != nil {
				return err
			}
			if printed, err := r.print(r.env.Out, m); printed {
				return err
			}
			if dryRun {
				data, err := yaml.Marshal(m)
				if err != nil {
					return err
				}
				_, err = r.env.Out.Write(data)
				return err
			}
			_, err = fmt.Fprintf(r.env.Out, "redispersistence/%s created, %s\n", to, describeRecovery(rp))
			return err
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "Name of the new RedisPersistence.")
	cmd.Flags().StringVar(&backup, "backup", "", "Restore this Completed RedisBackup of NAME.")
	cmd.Flags().StringVar(&at, "time", "", "Replay NAME's AOF archive up to this time (RFC 3339, for example 2026-11-27T06:30:00Z).")
	cmd.Flags().BoolVar(&latest, "latest", false, "Recover the newest point NAME's store holds: the end of its archive, or its newest Completed backup without one.")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "Print the RedisPersistence (validated by the API server) and create nothing.")
	return cmd
}

// planRestore is the RedisPersistence to that recovers source from the
// instance name's store, once the checks the operator makes before it
// restores pass here already: the backup exists, is name's and is
// Completed; the time is inside the reach name's archive reports.
func planRestore(ctx context.Context, c client.Client, namespace, name, to string, source restoreSource) (*v1alpha1.RedisPersistence, error) {
	rp, err := getInstance(ctx, c, namespace, name)
	if err != nil {
		return nil, err
	}
	if rp.Spec.Backup == nil {
		return nil, fmt.Errorf("the RedisPersistence %s/%s has no spec.backup: it has no store to restore from", namespace, name)
	}
	existing := &v1alpha1.RedisPersistence{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: to}, existing); err == nil {
		return nil, fmt.Errorf("the RedisPersistence %s/%s already exists: a restore starts a new instance; choose another --to", namespace, to)
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading the RedisPersistence %s/%s: %w", namespace, to, err)
	}

	if source.latest {
		source, err = latestSource(rp)
		if err != nil {
			return nil, err
		}
	}
	var recovery v1alpha1.RecoverySpec
	switch {
	case source.backup != "":
		b := &v1alpha1.RedisBackup{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: source.backup}, b); apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("no RedisBackup %q in namespace %q (kubectl get rbak -n %s lists them)", source.backup, namespace, namespace)
		} else if err != nil {
			return nil, fmt.Errorf("reading the RedisBackup %s/%s: %w", namespace, source.backup, err)
		}
		if err := checkBackup(b, name); err != nil {
			return nil, err
		}
		recovery.Backup = &v1alpha1.LocalObjectReference{Name: b.Name}
	case source.time != nil:
		if err := checkArchiveReach(rp, *source.time); err != nil {
			return nil, err
		}
		recovery.Archive = &v1alpha1.ArchiveRecovery{Path: specs.BackupPrefix(rp), TargetTime: &metav1.Time{Time: source.time.UTC()}}
	default:
		// No targetTime: the operator replays the archive to the latest
		// point it holds when the new instance starts.
		recovery.Archive = &v1alpha1.ArchiveRecovery{Path: specs.BackupPrefix(rp)}
	}
	return restoredInstance(rp, to, recovery), nil
}

// latestSource is what --latest recovers of rp: its archive to the end
// when its status reports one, else its newest Completed backup.
func latestSource(rp *v1alpha1.RedisPersistence) (restoreSource, error) {
	if a := rp.Status.Archive; a != nil && a.FirstRecoverableTime != nil && a.LastArchivedTime != nil {
		return restoreSource{latest: true}, nil
	}
	if rp.Status.LastBackup != nil {
		return restoreSource{backup: rp.Status.LastBackup.Name}, nil
	}
	return restoreSource{}, fmt.Errorf("the RedisPersistence %s reports neither an archive reach (status.archive) nor a Completed backup (status.lastBackup): it has nothing to restore yet", rp.Name)
}

func countSet(flags ...bool) int {
	n := 0
	for _, set := range flags {
		if set {
			n++
		}
	}
	return n
}

// checkBackup refuses a backup that is not instance's, or not Completed:
// the operator would hold the new instance without servers until it is.
func checkBackup(b *v1alpha1.RedisBackup, instance string) error {
	if b.Spec.RedisPersistence.Name != instance {
		return fmt.Errorf("the RedisBackup %s is a backup of %s, not of %s", b.Name, b.Spec.RedisPersistence.Name, instance)
	}
	if b.Status.Phase != v1alpha1.BackupCompleted || b.Status.Location == "" || b.Status.SHA256 == "" {
		msg := fmt.Sprintf("the RedisBackup %s is %s, not Completed: only a Completed backup can be restored", b.Name, phaseOf(b))
		if b.Status.Message != "" {
			msg += " (" + b.Status.Message + ")"
		}
		return fmt.Errorf("%s", msg)
	}
	return nil
}

// checkArchiveReach refuses a time outside what rp's status.archive says
// can be recovered: before the first base (the operator refuses it for
// good) or after the last archived point (the operator would wait for it).
func checkArchiveReach(rp *v1alpha1.RedisPersistence, t time.Time) error {
	a := rp.Status.Archive
	if a == nil || a.FirstRecoverableTime == nil || a.LastArchivedTime == nil {
		msg := fmt.Sprintf("the RedisPersistence %s reports no archive reach (status.archive): nothing can be recovered to a time", rp.Name)
		switch {
		case rp.Spec.Backup.Archive == nil:
			msg += "; it has no spec.backup.archive, restore a backup with --backup instead"
		case a != nil && a.Message != "":
			msg += ": " + a.Message
		}
		return fmt.Errorf("%s", msg)
	}
	first, last := a.FirstRecoverableTime.UTC(), a.LastArchivedTime.UTC()
	reach := fmt.Sprintf("the archive of %s reaches from %s to %s", rp.Name, first.Format(time.RFC3339), last.Format(time.RFC3339))
	switch {
	case t.Before(first):
		return fmt.Errorf("--time %s is before the archive's first base: %s, and nothing before it can be recovered", t.UTC().Format(time.RFC3339), reach)
	case t.After(last):
		return fmt.Errorf("--time %s is after the last archived point: %s (as the operator read it %s); choose a time inside it",
			t.UTC().Format(time.RFC3339), reach, checkedAt(a))
	}
	return nil
}

func checkedAt(a *v1alpha1.ArchiveStatus) string {
	if a.CheckedAt == nil {
		return "last"
	}
	return "at " + rfc3339(*a.CheckedAt)
}

// restoredInstance is to: src's spec with recovery as its bootstrap, in
// src's store under the new instance's own default path (two instances
// must not share one), without src's status or metadata beyond the
// namespace.
func restoredInstance(src *v1alpha1.RedisPersistence, to string, recovery v1alpha1.RecoverySpec) *v1alpha1.RedisPersistence {
	rp := &v1alpha1.RedisPersistence{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RedisPersistence"},
		ObjectMeta: metav1.ObjectMeta{Namespace: src.Namespace, Name: to},
		Spec:       *src.Spec.DeepCopy(),
	}
	rp.Spec.Backup.Destination.S3.Path = ""
	rp.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Recovery: recovery}
	return rp
}

// manifest is rp as a user writes it: without the empty status and
// creationTimestamp a typed object carries.
func manifest(rp *v1alpha1.RedisPersistence) (map[string]any, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rp)
	if err != nil {
		return nil, err
	}
	delete(m, "status")
	unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
	return m, nil
}

func describeRecovery(rp *v1alpha1.RedisPersistence) string {
	r := rp.Spec.Bootstrap.Recovery
	if r.Backup != nil {
		return "restoring the backup " + r.Backup.Name
	}
	archive := fmt.Sprintf("replaying the archive s3://%s/%s", rp.Spec.Backup.Destination.S3.Bucket, r.Archive.Path)
	if r.Archive.TargetTime == nil {
		return archive + " to its end"
	}
	return archive + " up to " + rfc3339(*r.Archive.TargetTime)
}
