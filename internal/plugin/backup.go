package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// backupNamePrefix is as much of the instance's name as a backup's name
// holds: 41 + "-" + 14 digits is 56, a RedisBackup's most. The seconds keep
// it apart from the scheduled backups' names, which end in 12 digits.
const backupNamePrefix = 41

// BackupName is the RedisBackup `backup` creates of instance at now:
// <instance>-<yyyymmddhhmmss> in UTC.
func BackupName(instance string, now time.Time) string {
	if len(instance) > backupNamePrefix {
		instance = instance[:backupNamePrefix]
	}
	return instance + "-" + now.UTC().Format("20060102150405")
}

func (r *root) backupCommand() *cobra.Command {
	var (
		wait    bool
		timeout time.Duration
		target  string
	)
	cmd := &cobra.Command{
		Use:   "backup NAME",
		Short: "Take a backup of a RedisPersistence now (a RedisBackup named NAME-<yyyymmddhhmmss>)",
		Long: "backup creates a RedisBackup of the instance NAME, which the operator takes to the instance's\n" +
			"spec.backup.destination. With --wait it follows the backup until it is Completed or Failed, and\n" +
			"exits non-zero when it Failed.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, namespace, err := r.client()
			if err != nil {
				return err
			}
			b, err := createBackup(cmd.Context(), c, namespace, args[0], v1alpha1.BackupTarget(target), r.env.Clock.Now())
			if err != nil {
				return err
			}
			progress := r.env.Out
			if output(r.output) != outputTable {
				progress = r.env.ErrOut
			}
			_, _ = fmt.Fprintf(progress, "redisbackup/%s created\n", b.Name)
			if wait {
				var deadline <-chan time.Time
				if timeout > 0 {
					timer := time.NewTimer(timeout)
					defer timer.Stop()
					deadline = timer.C
				}
				b, err = waitForBackup(cmd.Context(), c, b, r.env.PollInterval, deadline, progress)
				if err != nil && b == nil {
					return err
				}
			}
			if printed, perr := r.print(r.env.Out, b); printed && perr != nil {
				return perr
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "Follow the backup until it is Completed or Failed; exit non-zero when it Failed.")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "With --wait, give up after this long (0: wait as long as it takes).")
	cmd.Flags().StringVar(&target, "target", "", "The server the snapshot comes from: PreferReplica (the operator's default) or Primary.")
	return cmd
}

// createBackup creates the RedisBackup of the instance name, once it found
// the instance with a destination to back up to: a backup of an instance
// without spec.backup would only wait Pending.
func createBackup(ctx context.Context, c client.Client, namespace, name string, target v1alpha1.BackupTarget, now time.Time) (*v1alpha1.RedisBackup, error) {
	rp, err := getInstance(ctx, c, namespace, name)
	if err != nil {
		return nil, err
	}
	if rp.Spec.Backup == nil {
		return nil, fmt.Errorf("the RedisPersistence %s/%s has no spec.backup: set spec.backup.destination (docs/backup.md) for its backups to have somewhere to go", namespace, name)
	}
	switch target {
	case "", v1alpha1.TargetPreferReplica, v1alpha1.TargetPrimary:
	default:
		return nil, fmt.Errorf("--target %s: the targets are %s and %s", target, v1alpha1.TargetPreferReplica, v1alpha1.TargetPrimary)
	}
	b := &v1alpha1.RedisBackup{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RedisBackup"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: BackupName(name, now)},
		Spec:       v1alpha1.RedisBackupSpec{RedisPersistence: v1alpha1.LocalObjectReference{Name: name}, Target: target},
	}
	if err := c.Create(ctx, b, client.FieldOwner(FieldOwner)); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("the RedisBackup %s/%s already exists: a backup of %s was created this second; try again", namespace, b.Name, name)
		}
		return nil, fmt.Errorf("creating the RedisBackup %s/%s: %w", namespace, b.Name, err)
	}
	return b, nil
}

// errBackupFailed is returned when a backup ended Failed.
var errBackupFailed = errors.New("backup failed")

// waitForBackup reads b every interval until it is Completed or Failed,
// or until deadline (nil: none), writing each phase it sees (and the
// message with it) to progress. It returns the backup as last read, with
// errBackupFailed when it Failed; a nil backup only when it could not be
// read at all.
func waitForBackup(ctx context.Context, c client.Client, b *v1alpha1.RedisBackup, interval time.Duration, deadline <-chan time.Time,
	progress io.Writer) (*v1alpha1.RedisBackup, error) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	var seen string
	for {
		current := &v1alpha1.RedisBackup{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(b), current); err != nil {
			return nil, fmt.Errorf("reading the RedisBackup %s: %w", b.Name, err)
		}
		b = current
		if state := string(b.Status.Phase) + "\x00" + b.Status.Message; state != seen && b.Status.Phase != "" {
			seen = state
			_, _ = fmt.Fprintf(progress, "%s: %s%s\n", b.Name, b.Status.Phase, wrap(": ", b.Status.Message, ""))
		}
		switch b.Status.Phase {
		case v1alpha1.BackupCompleted:
			_, _ = fmt.Fprintf(progress, "%s: %s, point %s, %s\n", b.Name, b.Status.Location, rfc3339(ptrTime(b.Status.Point)), byteSize(b.Status.Size))
			return b, nil
		case v1alpha1.BackupFailed:
			return b, fmt.Errorf("%w: the RedisBackup %s is Failed: %s", errBackupFailed, b.Name, b.Status.Message)
		}
		select {
		case <-ctx.Done():
			return b, fmt.Errorf("stopped following the RedisBackup %s, which is %s: %w", b.Name, phaseOf(b), context.Cause(ctx))
		case <-deadline:
			return b, fmt.Errorf("the RedisBackup %s is still %s after --timeout; it goes on without the plugin (kubectl get rbak %s)", b.Name, phaseOf(b), b.Name)
		case <-ticker.C:
		}
	}
}

func phaseOf(b *v1alpha1.RedisBackup) string {
	if b.Status.Phase == "" {
		return "new (the operator has not seen it)"
	}
	return string(b.Status.Phase)
}

func ptrTime(t *metav1.Time) metav1.Time {
	if t == nil {
		return metav1.Time{}
	}
	return *t
}
