package plugin

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

func (r *root) switchoverCommand() *cobra.Command {
	var (
		to      string
		wait    bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "switchover NAME [--to POD] [--wait]",
		Short: "Hand a replicated instance's primary role to a replica the operator's way: writes paused, a caught-up replica promoted",
		Long: "switchover asks the operator to hand the primary role of the replicated instance NAME to the replica\n" +
			"--to names (default: the one the Sentinels choose), as it does before a rolling change restarts the\n" +
			"primary: it pauses the writes, waits for the replicas to hold every write, asks the Sentinels to\n" +
			"promote the replica and makes the old primary its replica. No pod is deleted. The plugin sets the\n" +
			"annotations " + specs.AnnotationSwitchoverTo + " and " + specs.AnnotationSwitchoverRequestedAt + " (the time);\n" +
			"the operator answers in status.switchover and with an event. With --wait it follows the request\n" +
			"until the operator answers, prints the new primary, and exits non-zero when the operator refused or\n" +
			"failed, with the reason.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, namespace, err := r.client()
			if err != nil {
				return err
			}
			rp, req, err := requestSwitchover(cmd.Context(), c, namespace, args[0], to, r.env.Clock.Now())
			if err != nil {
				return err
			}
			progress := r.env.Out
			if output(r.output) != outputTable {
				progress = r.env.ErrOut
			}
			_, _ = fmt.Fprintf(progress, "redispersistence/%s switchover to %s requested at %s\n", rp.Name, describeTarget(req.To), req.RequestedAt)
			if !wait {
				if printed, err := r.print(r.env.Out, rp); printed {
					return err
				}
				_, err = fmt.Fprintf(r.env.Out, "the operator answers in status.switchover (kubectl uring switchover %s --wait follows a request; kubectl uring status %s shows the primary)\n", rp.Name, rp.Name)
				return err
			}
			var deadline <-chan time.Time
			if timeout > 0 {
				timer := time.NewTimer(timeout)
				defer timer.Stop()
				deadline = timer.C
			}
			rp, err = waitForSwitchover(cmd.Context(), c, rp, req, r.env.PollInterval, deadline, progress)
			if printed, perr := r.print(r.env.Out, rp); printed && perr != nil {
				return perr
			}
			return err
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "The replica pod to promote (default: the replica the Sentinels choose).")
	cmd.Flags().BoolVar(&wait, "wait", false, "Follow the request until the operator answers; exit non-zero when it refused or failed.")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "With --wait, give up after this long (0: wait as long as it takes); the request stays.")
	return cmd
}

func describeTarget(to string) string {
	if to == specs.SwitchoverToAny {
		return "the replica the Sentinels choose"
	}
	return to
}

// requestSwitchover sets the switchover annotations on the instance name
// (to is a pod, or "" for any replica) and returns it as patched with the
// request. It refuses first what status already shows the operator would
// refuse: an instance that is not replicated, a pod that is not one of its
// replicas, a replica whose link to the primary is down.
func requestSwitchover(ctx context.Context, c client.Client, namespace, name, to string, now time.Time) (*v1alpha1.RedisPersistence, specs.SwitchoverRequest, error) {
	req := specs.SwitchoverRequest{To: to, RequestedAt: now.UTC().Format(time.RFC3339)}
	if req.To == "" {
		req.To = specs.SwitchoverToAny
	}
	rp, err := getInstance(ctx, c, namespace, name)
	if err != nil {
		return nil, req, err
	}
	if err := switchoverRefusal(rp, req.To); err != nil {
		return nil, req, err
	}
	if rp.Annotations[specs.AnnotationSwitchoverTo] == req.To && rp.Annotations[specs.AnnotationSwitchoverRequestedAt] == req.RequestedAt {
		return nil, req, fmt.Errorf("a switchover of %s/%s to %s was requested this second already (%s=%s); try again", namespace, name,
			req.To, specs.AnnotationSwitchoverRequestedAt, req.RequestedAt)
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q,%q:%q}}}`,
		specs.AnnotationSwitchoverTo, req.To, specs.AnnotationSwitchoverRequestedAt, req.RequestedAt)
	if err := c.Patch(ctx, rp, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldOwner)); err != nil {
		return nil, req, fmt.Errorf("annotating the RedisPersistence %s/%s: %w", namespace, name, err)
	}
	return rp, req, nil
}

// switchoverRefusal is why the operator would refuse a switchover of rp to
// `to` by what its status shows, nil when it would take it up.
func switchoverRefusal(rp *v1alpha1.RedisPersistence, to string) error {
	switch {
	case rp.Spec.Cluster != nil:
		return fmt.Errorf("%s is sharded (spec.cluster): each shard's replicas take over by themselves; switchover is for an instance of spec.replicas with Sentinels", rp.Name)
	case rp.Spec.Replicas < 2:
		return fmt.Errorf("%s runs one server (spec.replicas %d): there is no replica to hand the primary role to", rp.Name, rp.Spec.Replicas)
	case to == specs.SwitchoverToAny:
		return nil
	case to == rp.Status.Primary:
		return fmt.Errorf("%s is the primary of %s already", to, rp.Name)
	}
	var replicas []string
	for _, s := range rp.Status.Replicas {
		if s.Role != v1alpha1.RoleReplica {
			continue
		}
		replicas = append(replicas, s.Pod)
		if s.Pod == to && !s.LinkUp {
			return fmt.Errorf("%s's link to the primary %s is down (status.replicas): it does not hold the primary's writes", to, rp.Status.Primary)
		}
	}
	if !slices.Contains(replicas, to) {
		return fmt.Errorf("%s is not a replica of %s (its replicas: %s; kubectl uring status %s lists the servers)", to, rp.Name, listOrNone(replicas), rp.Name)
	}
	return nil
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// waitForSwitchover reads the instance every interval until the operator
// answers req in status.switchover, or until deadline (nil: none), and
// writes the answer to progress. It returns the instance as last read, with
// an error when the operator refused or failed, or gave no answer.
func waitForSwitchover(ctx context.Context, c client.Client, rp *v1alpha1.RedisPersistence, req specs.SwitchoverRequest, interval time.Duration,
	deadline <-chan time.Time, progress io.Writer) (*v1alpha1.RedisPersistence, error) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		current := &v1alpha1.RedisPersistence{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(rp), current); err != nil {
			return rp, fmt.Errorf("reading the RedisPersistence %s: %w", rp.Name, err)
		}
		rp = current
		if answer := rp.Status.Switchover; req.AnsweredBy(answer) {
			switch answer.Result {
			case v1alpha1.SwitchoverSucceeded:
				_, _ = fmt.Fprintf(progress, "%s: %s is the primary: %s\n", rp.Name, answer.Primary, answer.Message)
				return rp, nil
			case v1alpha1.SwitchoverRefused:
				return rp, fmt.Errorf("the operator refused the switchover of %s (%s): %s", rp.Name, answer.Reason, answer.Message)
			}
			return rp, fmt.Errorf("the switchover of %s failed (%s): %s", rp.Name, answer.Reason, answer.Message)
		}
		select {
		case <-ctx.Done():
			return rp, fmt.Errorf("stopped following the switchover of %s, which the operator has not answered: %w", rp.Name, context.Cause(ctx))
		case <-deadline:
			return rp, fmt.Errorf("the operator has not answered the switchover of %s after --timeout; the request stays (kubectl uring status %s, kubectl describe rp %s)", rp.Name, rp.Name, rp.Name)
		case <-ticker.C:
		}
	}
}
