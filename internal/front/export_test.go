package front

import (
	"time"

	"github.com/orangerail/orangerail/internal/database"
)

// NewBatchLimiterForTest is NewBatchLimiter whose every flush runs
// afterWrite between its write's commit and its read, with the backend
// serving both.
func NewBatchLimiterForTest(pool database.TxBeginner, o BatchOptions, afterWrite func(pid uint32)) *BatchLimiter {
	return newBatchLimiter(pool, o, afterWrite)
}

// SetClockForTest makes l read the time from now.
func SetClockForTest(l *BatchLimiter, now func() time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.now = now
}
