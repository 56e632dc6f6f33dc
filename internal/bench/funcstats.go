package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// With -function-stats the governed lifecycle rounds report where
// Postgres spends a cycle's time: each orangerail function's calls and
// time, by pg_stat_user_functions, per governed cycle. Timing every call
// costs the governed side a little, so the flag is for finding what
// bounds the lifecycle, not for its ratio.

// functionStat is what pg_stat_user_functions counts of one function.
type functionStat struct {
	calls int64
	// total is the time in the function and in what it called; self
	// leaves out the functions it called. Milliseconds of wall time, lock
	// waits and waits for a CPU included.
	total, self float64
}

// trackFunctions makes the connections opened to the database of admin
// from now on time every call of a plpgsql function (track_functions =
// 'pl'). The setting is the bench database's own and goes with it.
func trackFunctions(ctx context.Context, admin *pgxpool.Pool) error {
	_, err := admin.Exec(ctx, `DO $$ BEGIN
		EXECUTE format('ALTER DATABASE %I SET track_functions = ''pl''', current_database());
	END $$`)
	return err
}

// statsExit is how long the bench waits for backends it closed to exit.
const statsExit = time.Second

// readFunctionStats reads the counts of the orangerail schema's functions,
// by name. A backend keeps its counts for up to seconds before it reports
// them, and reports them all when it exits: the connections of pools, the
// ones the functions ran on, are closed first (the pools open new ones).
func readFunctionStats(ctx context.Context, admin *pgxpool.Pool, pools ...*pgxpool.Pool) (map[string]functionStat, error) {
	for _, p := range pools {
		p.Reset()
	}
	time.Sleep(statsExit)
	rows, err := admin.Query(ctx, `SELECT funcname, calls, total_time, self_time FROM pg_stat_user_functions WHERE schemaname = 'orangerail'`)
	if err != nil {
		return nil, err
	}
	stats := map[string]functionStat{}
	var name string
	var s functionStat
	_, err = pgx.ForEachRow(rows, []any{&name, &s.calls, &s.total, &s.self}, func() error {
		stats[name] = s
		return nil
	})
	return stats, err
}

// emitFunctionStats emits, per cycle of cycles, what each function was
// counted between before and after, the longest first.
func emitFunctionStats(before, after map[string]functionStat, cycles int, emit func(result)) {
	if cycles == 0 {
		return
	}
	n := float64(cycles)
	spent := map[string]functionStat{}
	for name, a := range after {
		b := before[name]
		if d := (functionStat{a.calls - b.calls, a.total - b.total, a.self - b.self}); d.calls > 0 {
			spent[name] = d
		}
	}
	names := slices.SortedFunc(maps.Keys(spent), func(x, y string) int {
		return cmp.Or(cmp.Compare(spent[y].total, spent[x].total), cmp.Compare(x, y))
	})
	for _, name := range names {
		s := spent[name]
		emit(result{Name: "lifecycle_pg_function_" + name, Value: round2(s.total / n),
			Unit: fmt.Sprintf("ms/cycle (self %.2f; %.2f calls/cycle)", s.self/n, float64(s.calls)/n)})
	}
}
