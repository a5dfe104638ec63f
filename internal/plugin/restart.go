package plugin

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

func (r *root) restartCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "restart NAME",
		Short: "Restart a RedisPersistence's servers the operator's way: one at a time, a switchover before the primary's turn",
		Long: "restart asks the operator to restart the servers of the instance NAME, as `kubectl rollout restart`\n" +
			"does for a Deployment: it sets the annotation " + specs.AnnotationRestartedAt + " to the time, which the\n" +
			"operator copies into the servers' pod template. The new template rolls as a change of the spec does:\n" +
			"with spec.updateStrategy switchover (the default with replicas) the replicas restart first, one at a\n" +
			"time, and the Sentinels hand the primary role to a restarted one before the old primary restarts. It\n" +
			"deletes no pod. kubectl uring status NAME follows it.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, namespace, err := r.client()
			if err != nil {
				return err
			}
			rp, at, err := requestRestart(cmd.Context(), c, namespace, args[0], r.env.Clock.Now())
			if err != nil {
				return err
			}
			if printed, err := r.print(r.env.Out, rp); printed {
				return err
			}
			how := "its server restarts"
			switch {
			case rp.SwitchesOverOnUpdate() && rp.Spec.Cluster != nil:
				how = "in each shard the replicas restart one at a time, then a restarted one takes over (CLUSTER FAILOVER), then the old primary restarts"
			case rp.SwitchesOverOnUpdate():
				how = "its replicas restart one at a time, then the Sentinels hand the primary role to a restarted one, then the old primary restarts"
			case rp.Spec.Replicas > 1 || rp.Spec.Cluster != nil:
				how = "its servers restart one at a time, the primary like the others (spec.updateStrategy " + string(rp.Spec.UpdateStrategy) + ")"
			}
			_, err = fmt.Fprintf(r.env.Out, "redispersistence/%s restart requested at %s: %s (kubectl uring status %s follows it)\n", rp.Name, at, how, rp.Name)
			return err
		},
	}
}

// requestRestart sets specs.AnnotationRestartedAt on the instance to now and
// returns it as patched.
func requestRestart(ctx context.Context, c client.Client, namespace, name string, now time.Time) (*v1alpha1.RedisPersistence, string, error) {
	rp, err := getInstance(ctx, c, namespace, name)
	if err != nil {
		return nil, "", err
	}
	at := now.UTC().Format(time.RFC3339)
	if rp.Annotations[specs.AnnotationRestartedAt] == at {
		return nil, "", fmt.Errorf("a restart of %s/%s was requested this second already (%s=%s); try again", namespace, name, specs.AnnotationRestartedAt, at)
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, specs.AnnotationRestartedAt, at)
	if err := c.Patch(ctx, rp, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldOwner)); err != nil {
		return nil, "", fmt.Errorf("annotating the RedisPersistence %s/%s: %w", namespace, name, err)
	}
	return rp, at, nil
}
