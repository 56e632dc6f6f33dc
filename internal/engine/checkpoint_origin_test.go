package engine_test

import (
	"context"
	"testing"

	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
)

// TestCheckpointOriginCannotChangeUnderALog: the origin names the log a
// tree is of, and the default one is "orangerail/<service>": renaming the
// service (or setting audit.checkpoint.origin later) went on extending
// the same tree under another origin, so every consistency proof from a
// checkpoint an auditor kept to one signed since is refused offline
// ("the checkpoints are of two logs"), for ever, and nothing said so when
// signing. The signer refuses, coded, to extend a tree under another
// origin than the one its latest checkpoint names.
func TestCheckpointOriginCannotChangeUnderALog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	key, pub := signingKey(t, "orangerail.test")
	appendBulk(t, b.runtime, "acme", 0, 5)
	signNow(t, b.runtime, "acme", key, 5)
	appendBulk(t, b.runtime, "acme", 5, 5)
	c, err := engine.SignCheckpoint(ctx, b.runtime, "acme", key, "orangerail/renamed-service")
	if err == nil {
		// It signed: the tree goes on under a new origin, and the kept
		// checkpoint of size 5 can never be tied to it again.
		p, perr := engine.ProveConsistency(ctx, b.runtime, "acme", 5, 0)
		if perr != nil {
			t.Fatalf("signed %+v under another origin; prove: %v", c, perr)
		}
		_, cerr := offline(t, p, pub)
		t.Fatalf("signed a checkpoint of size %d under another origin than its log's; the consistency proof from the kept one: %v", c.Size, cerr)
	}
	if errcode.Of(err) == "" {
		t.Fatalf("an uncoded error: %v", err)
	}
	// The log's own origin goes on.
	signNow(t, b.runtime, "acme", key, 10)
}
