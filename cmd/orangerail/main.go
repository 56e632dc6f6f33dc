// Command orangerail governs what AI agents may do: it serves a declared
// ontology over MCP and keeps a hash-chained audit of every governed write.
// Everything it does lives in internal/cli and below; main only wires the
// process's signals, arguments and streams to it.
package main

import (
	"context"
	"os"

	"github.com/orangerail/orangerail/internal/cli"
)

func main() {
	ctx, stop := cli.NotifyContext(context.Background())
	code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
