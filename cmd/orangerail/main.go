// Command orangerail governs what AI agents may do: it serves a declared
// ontology over MCP and keeps a hash-chained audit of every governed write.
// Everything it does lives in internal/cli and below; main only wires the
// process's signals, arguments and streams to it.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/orangerail/orangerail/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first signal asks the command to stop (ctx ends): serve
		// drains, a verify stops reading. The signals after it act as
		// they do by default again, so a second ends a command that does
		// not stop, or stops too slowly for its operator.
		<-ctx.Done()
		stop()
	}()
	code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
