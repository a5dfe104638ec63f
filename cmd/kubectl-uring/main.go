// Command kubectl-uring is the kubectl plugin of uring-redis-operator: on the
// PATH, `kubectl uring status|backup|restore|bench|report|restart|switchover|cli`
// runs it. The commands live in internal/plugin.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/clock"

	"github.com/uring-redis/uring-redis-operator/internal/plugin"
)

func main() { os.Exit(run()) }

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cmd := plugin.NewCommand(plugin.Env{
		IOStreams:    genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr},
		Clock:        clock.RealClock{},
		PollInterval: 2 * time.Second,
	})
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		return 1
	}
	return 0
}
