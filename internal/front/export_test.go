package front

import (
	"context"
	"time"

	"github.com/orangerail/orangerail/internal/database"
)

// NewBatchLimiterForTest is NewBatchLimiter whose every flush runs
// afterWrite between its write's commit and its read, with the backend
// serving both.
func NewBatchLimiterForTest(pool database.TxBeginner, o BatchOptions, afterWrite func(pid uint32)) *BatchLimiter {
	return newBatchLimiter(pool, o, afterWrite)
}

// Flush flushes now, as the background flusher does.
func (l *BatchLimiter) Flush(ctx context.Context) error {
	l.mu.Lock()
	seen := l.flushes
	l.mu.Unlock()
	return l.flush(ctx, seen)
}

// SetClockForTest makes l read the time from now.
func SetClockForTest(l *BatchLimiter, now func() time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.now = now
}
