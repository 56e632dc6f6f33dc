// Command stubborn is TestSignals' command that does not stop: it takes
// the process's signals as orangerail's main does (cli.NotifyContext),
// says when its context ends, and goes on, so that only a second signal
// ends it.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/orangerail/orangerail/internal/cli"
)

func main() {
	ctx, stop := cli.NotifyContext(context.Background())
	defer stop()
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "asked to stop; not stopping")
	select {}
}
