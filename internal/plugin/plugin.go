// Package plugin is kubectl-uring, the kubectl plugin of uring-redis-operator
// (`kubectl uring`): the day-2 steps a user of a RedisPersistence takes most,
// each one command instead of YAML and jsonpath.
//
// Every command reads and writes the project's API objects through the API
// server, as the user's kubeconfig allows, and nothing else: what it prints
// is what the objects' status holds, and what it creates is what the
// operator then acts on. The checks a command makes before it creates
// something are the operator's own (a restore's backup is Completed, its
// time inside the archive's reach), so a mistake is refused at the prompt
// rather than found later in a condition.
package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/uring-redis/uring-redis-operator/api/v1alpha1"
)

// FieldOwner is the field manager of the objects the plugin creates.
const FieldOwner = "kubectl-uring"

// Env is what the commands need from outside: the terminal, the time, and
// how often a command that waits reads the object it waits for.
type Env struct {
	genericiooptions.IOStreams
	Clock        clock.PassiveClock
	PollInterval time.Duration
}

// output is the -o flag: empty for the tables people read, json or yaml for
// scripts.
type output string

const (
	outputTable output = ""
	outputJSON  output = "json"
	outputYAML  output = "yaml"
)

// root holds what every subcommand shares: the kubectl flags and -o.
type root struct {
	env    Env
	flags  *genericclioptions.ConfigFlags
	output string
}

// NewCommand is `kubectl uring` with its subcommands.
func NewCommand(env Env) *cobra.Command {
	r := &root{env: env, flags: genericclioptions.NewConfigFlags(true)}
	cmd := &cobra.Command{
		Use:   "kubectl-uring",
		Short: "Day-2 operations on RedisPersistence instances of uring-redis-operator",
		Long: "kubectl uring shows the state of a RedisPersistence on one screen, takes a backup now,\n" +
			"writes the RedisPersistence that restores one into a new instance, benchmarks instances side\n" +
			"by side, restarts the servers or hands the primary role over without a write outage, opens\n" +
			"valkey-cli on a server, and writes a report for a bug report with every secret cut out.",
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl uring"},
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			switch output(r.output) {
			case outputTable, outputJSON, outputYAML:
				return nil
			}
			return fmt.Errorf("-o %s: the outputs are json and yaml (and the default table)", r.output)
		},
	}
	cmd.SetIn(env.In)
	cmd.SetOut(env.Out)
	cmd.SetErr(env.ErrOut)
	r.flags.AddFlags(cmd.PersistentFlags())
	cmd.PersistentFlags().StringVarP(&r.output, "output", "o", "", "Output format: json or yaml; a table when empty.")
	cmd.AddCommand(r.statusCommand(), r.backupCommand(), r.restoreCommand(), r.benchCommand(), r.reportCommand(), r.restartCommand(), r.switchoverCommand(), r.cliCommand())
	return cmd
}

// client is a client of the API server the kubectl flags name, and the
// namespace they select.
func (r *root) client() (client.Client, string, error) {
	c, _, namespace, err := r.clients()
	return c, namespace, err
}

// clients is client with the REST configuration it was made from, which
// the commands that exec in a pod or read logs need too.
func (r *root) clients() (client.Client, *rest.Config, string, error) {
	config, err := r.flags.ToRESTConfig()
	if err != nil {
		return nil, nil, "", err
	}
	namespace, _, err := r.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, nil, "", err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, nil, "", err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, nil, "", err
	}
	c, err := client.New(config, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, "", err
	}
	return c, config, namespace, nil
}

// print writes v as -o asks when it asks for json or yaml, and returns
// false for the table, which the caller writes.
func (r *root) print(w io.Writer, v any) (bool, error) {
	switch output(r.output) {
	case outputJSON:
		data, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return true, err
		}
		_, err = fmt.Fprintf(w, "%s\n", data)
		return true, err
	case outputYAML:
		data, err := yaml.Marshal(v)
		if err != nil {
			return true, err
		}
		_, err = w.Write(data)
		return true, err
	}
	return false, nil
}
