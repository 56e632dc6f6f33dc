package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/sqlquery"
)

// sqlQueryWorkers is how many queries run at once in sql_query_hostile_rss:
// the Querier's global ceiling, each from a tenant of its own so that
// every one of them runs.
const sqlQueryWorkers = sqlquery.MaxConcurrent

// benignSQL are ordinary auditor reads with small answers.
var benignSQL = []string{
	"SELECT 1",
	"SELECT * FROM generate_series(1, 200)",
	"SELECT seq, phase FROM audit ORDER BY seq LIMIT 100",
	"SELECT count(*), max(at) FROM audit",
}

// hostileSQL are statements whose answers, read naively, are hundreds of
// megabytes: one huge value, a wide row, an aggregate grown in the
// database, many long rows, and an error that quotes a huge value.
func hostileSQL() []string {
	wide := make([]string, 100)
	for i := range wide {
		wide[i] = fmt.Sprintf("repeat('y', 2000000) AS c%d", i)
	}
	return []string{
		"SELECT repeat('x', 200000000)",
		"SELECT " + strings.Join(wide, ", "),
		"SELECT string_agg(repeat('z', 1000), '') FROM generate_series(1, 200000)",
		"SELECT repeat('w', 1000000) FROM generate_series(1, 1000)",
		"SELECT repeat('v', 100000000)::int",
	}
}

// sqlQueryHostileRSS measures the process's peak resident memory while
// sqlQueryWorkers hostile statements run at once through the Querier, next
// to the same with benign statements: ratio is hostile / benign. Refusals
// and failures of hostile statements are expected and counted, not errors.
func sqlQueryHostileRSS(ctx context.Context, dbURL string, store *pgxpool.Pool, emit func(result)) error {
	u, err := url.Parse(dbURL)
	if err != nil {
		return err
	}
	u.User = url.User(sqlquery.QueryRole)
	q, err := sqlquery.New(ctx, sqlquery.Config{URL: u.String(), Store: store})
	if err != nil {
		return err
	}
	const rounds = 3
	ended := map[string]int{} // how hostile statements ended, by SQLSTATE or refusal
	run := func(statements []string, hostile bool) (peakKB int64, failed int, err error) {
		var mu sync.Mutex
		var firstErr error
		peak := startPeakRSS()
		var wg sync.WaitGroup
		for w := range sqlQueryWorkers {
			wg.Go(func() {
				tenant := fmt.Sprintf("bench-sql-%d", w)
				for r := range rounds {
					_, err := q.Query(ctx, tenant, statements[(w+r)%len(statements)])
					mu.Lock()
					switch {
					case err != nil && hostile:
						failed++
						ended[endedBy(err)]++
					case err != nil && firstErr == nil:
						firstErr = err
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return peak(), failed, firstErr
	}
	baseline, _, err := run(benignSQL, false)
	if err != nil {
		return fmt.Errorf("benign: %w", err)
	}
	hostile, failed, _ := run(hostileSQL(), true)
	fmt.Fprintf(os.Stderr, "sql_query_hostile_rss: %d of %d hostile statements ended in a refusal or failure %v\n", failed, sqlQueryWorkers*rounds, ended)
	mb := func(kb int64) float64 { return round2(float64(kb) / 1024) }
	emit(result{Name: "sql_query_hostile_rss", Value: mb(hostile), Unit: "MiB", Baseline: ptr(mb(baseline)), Ratio: ptr(round2(float64(hostile) / float64(baseline)))})
	return nil
}

// endedBy names how a query ended: its SQLSTATE, or its Go error type.
func endedBy(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return fmt.Sprintf("%T", err)
}

// startPeakRSS returns memory to the OS, resets the process's peak RSS
// (VmHWM) and returns a func that reports the peak since, in KiB. Where the
// kernel does not allow the reset, it samples VmRSS instead.
func startPeakRSS() func() int64 {
	runtime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err == nil {
		return func() int64 { return procStatusKB("VmHWM") }
	}
	stop := make(chan struct{})
	done := make(chan int64)
	go func() {
		var peak int64
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			peak = max(peak, procStatusKB("VmRSS"))
			select {
			case <-stop:
				done <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return func() int64 {
		close(stop)
		return <-done
	}
}

// procStatusKB reads one "Name: N kB" line of /proc/self/status, or 0.
func procStatusKB(name string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), name+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return n
		}
	}
	return 0
}
