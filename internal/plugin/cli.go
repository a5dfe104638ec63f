package plugin

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/kubectl/pkg/util/term"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
	"github.com/uring-redis/uring-redis-operator/internal/specs"
)

// valkey-cli runs inside the instance's pods, through the API server's exec
// (what `kubectl exec` does), never from the user's machine: the servers are
// reached from inside the pod, where the password and the TLS files already
// are, so the plugin reads no Secret and no password crosses the network or
// appears on a command line. valkey-cli reads the password from
// REDISCLI_AUTH, which the server and Sentinel containers have from the
// instance's Secret (specs.PasswordEnv); the plugin passes only the TLS
// flags (specs.CLITLSArgs: file names) and the user's arguments, as the
// positional parameters of `sh -c`, which no shell parses.
//
// A container holds the password it started with: after a rotation of the
// default password (spec.passwordGracePeriod) a pod started before it signs
// in with the previous one until that stops working, then fails with
// WRONGPASS until the pod restarts. The report's INFO signs in as the
// exporter's ACL user instead (PROBE_USER, PROBE_PASSWORD), whose password
// the operator never rotates under a running pod.

// cliUser is whom valkey-cli signs in as.
type cliUser int

const (
	// asDefault: the instance's password, for a person's session.
	asDefault cliUser = iota
	// asMonitor: the exporter's ACL user where the container has it (INFO
	// and PING only), else the instance's password.
	asMonitor
)

// cliScripts run valkey-cli with the arguments they are given. No history
// file: a typed AUTH would land there.
var cliScripts = map[cliUser]string{
	asDefault: `export REDISCLI_HISTFILE=/dev/null; exec valkey-cli "$@"`,
	asMonitor: `if [ -n "${PROBE_USER:-}" ]; then export REDISCLI_AUTH="$PROBE_PASSWORD"; set -- --user "$PROBE_USER" "$@"; fi; ` +
		`export REDISCLI_HISTFILE=/dev/null; exec valkey-cli "$@"`,
}

// cliTarget is where valkey-cli runs: a pod of the instance, its container
// and the port its server or Sentinel listens on.
type cliTarget struct {
	pod, container string
	port           int
}

// cliCommand is the exec command of valkey-cli for rp in target, signed
// in as user, with args after the instance's TLS flags and the port.
func cliCommand(rp *v1alpha1.RedisPersistence, target cliTarget, user cliUser, args []string) []string {
	command := []string{"sh", "-c", cliScripts[user], "valkey-cli"}
	command = append(command, specs.CLITLSArgs(rp)...)
	command = append(command, "-p", strconv.Itoa(target.port))
	return append(command, args...)
}

func (r *root) cliCommand() *cobra.Command {
	var pod string
	cmd := &cobra.Command{
		Use:   "cli NAME [--pod POD] [-- VALKEY-CLI ARGS...]",
		Short: "Run valkey-cli on the primary (or a named server or Sentinel) with the instance's password and TLS",
		Long: "cli runs valkey-cli in a pod of the instance NAME through kubectl exec: on the primary of a\n" +
			"replicated instance (status.primary), the server of a single one, the first shard's primary of a\n" +
			"sharded one (with -c, which follows the slots), or the server or Sentinel pod --pod names. It\n" +
			"signs in with the password the pod has from the instance's Secret and speaks TLS with spec.tls;\n" +
			"the password is on no command line and the plugin never reads it. The arguments after -- are\n" +
			"valkey-cli's: a command runs once, none opens a session (a terminal's, or commands read from\n" +
			"standard input).",
		Args: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); len(args) == 0 || dash == 0 || (dash == -1 && len(args) > 1) || dash > 1 {
				return fmt.Errorf("cli takes NAME, then valkey-cli's arguments after --")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, config, namespace, err := r.clients()
			if err != nil {
				return err
			}
			rp, err := getInstance(cmd.Context(), c, namespace, args[0])
			if err != nil {
				return err
			}
			target, err := findCLITarget(cmd.Context(), c, rp, pod)
			if err != nil {
				return err
			}
			cliArgs := args[1:]
			if pod == "" && rp.Spec.Cluster != nil {
				cliArgs = append([]string{"-c"}, cliArgs...)
			}
			tty := term.TTY{In: r.env.In, Out: r.env.Out, Raw: true}
			return tty.Safe(func() error {
				var sizes remotecommand.TerminalSizeQueue
				useTTY := tty.IsTerminalIn() && tty.IsTerminalOut()
				if useTTY {
					sizes = tty.MonitorSize(tty.GetSize())
				}
				opts := remotecommand.StreamOptions{Stdin: r.env.In, Stdout: r.env.Out, Stderr: r.env.ErrOut, Tty: useTTY, TerminalSizeQueue: sizes}
				if useTTY {
					opts.Stderr = nil // a terminal's output is one stream
				}
				return execInPod(cmd.Context(), config, namespace, target, cliCommand(rp, target, asDefault, cliArgs), opts)
			})
		},
	}
	cmd.Flags().StringVar(&pod, "pod", "", "The server or Sentinel pod of the instance to run valkey-cli on (default: the primary).")
	return cmd
}

// findCLITarget is the pod `cli` runs on: the one named, which must be a
// server or Sentinel of rp, or rp's primary.
func findCLITarget(ctx context.Context, c client.Client, rp *v1alpha1.RedisPersistence, named string) (cliTarget, error) {
	name := named
	switch {
	case name != "":
	case rp.Spec.Cluster != nil:
		if len(rp.Status.Shards) == 0 || rp.Status.Shards[0].Primary == "" {
			return cliTarget{}, fmt.Errorf("no primary of %s's first shard is known yet (status.shards): name a server with --pod", rp.Name)
		}
		name = rp.Status.Shards[0].Primary
	case rp.Spec.Replicas > 1:
		if rp.Status.Primary == "" {
			return cliTarget{}, fmt.Errorf("the primary of %s is not known (status.primary is empty; kubectl uring status %s says why): name a server with --pod", rp.Name, rp.Name)
		}
		name = rp.Status.Primary
	default:
		name = rp.Name + "-0"
	}
	pod := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: rp.Namespace, Name: name}, pod); apierrors.IsNotFound(err) {
		return cliTarget{}, fmt.Errorf("no pod %s in namespace %s", name, rp.Namespace)
	} else if err != nil {
		return cliTarget{}, fmt.Errorf("reading the pod %s: %w", name, err)
	}
	labels := pod.Labels
	switch {
	case labels[specs.LabelInstance] != rp.Name:
	case labels[specs.LabelName] == specs.SelectorLabels(rp)[specs.LabelName]:
		return cliTarget{pod: name, container: specs.ContainerRedis, port: specs.RedisPort}, nil
	case labels[specs.LabelName] == specs.SentinelSelectorLabels(rp)[specs.LabelName]:
		return cliTarget{pod: name, container: specs.ContainerSentinel, port: specs.SentinelPort}, nil
	}
	return cliTarget{}, fmt.Errorf("the pod %s is not a server or Sentinel of %s", name, rp.Name)
}

// execInPod runs command in target's container, as kubectl exec does, with
// opts' streams.
func execInPod(ctx context.Context, config *rest.Config, namespace string, target cliTarget, command []string, opts remotecommand.StreamOptions) error {
	clientset, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	req := clientset.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(target.pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: target.container,
			Command:   command,
			Stdin:     opts.Stdin != nil,
			Stdout:    opts.Stdout != nil,
			Stderr:    opts.Stderr != nil,
			TTY:       opts.Tty,
		}, scheme.ParameterCodec)
	exec, err := remotecommand.NewSPDYExecutor(config, "POST", req.URL())
	if err != nil {
		return err
	}
	if err := exec.StreamWithContext(ctx, opts); err != nil {
		return fmt.Errorf("valkey-cli in %s/%s: %w", namespace, target.pod, err)
	}
	return nil
}
