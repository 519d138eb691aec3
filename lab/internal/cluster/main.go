package cluster

import (
	"context"
	"fmt"
	"os"
	"os/signal"
)

// Main is a command's main: it calls run with a context that ends on an
// interrupt, and on an error prints "name: error" to standard error and
// exits with status 1.
func Main(name string, run func(context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		stop()
		os.Exit(1)
	}
}
