package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/store"
)

// verifyBenchmarks measures the Go and SQL verifiers over a long chain.
// The Go verifier runs against a baseline that streams the same rows out
// of Postgres, the same way, without verifying them: the read limit. The
// two alternate, A B A B …, so that load from elsewhere on the machine
// falls on both, and the ratio reported is the median of the rounds'.
func verifyBenchmarks(ctx context.Context, admin, runtime *pgxpool.Pool, chainRows, rounds int, profileVerify func() func(), emit func(result)) error {
	if err := buildChain(ctx, admin, "verify-bench", chainRows); err != nil {
		return fmt.Errorf("build chain: %w", err)
	}
	// Measure the verifier as `orangerail audit verify` runs it.
	debug.SetGCPercent(engine.VerifyGCPercent)
	var governed, baseline, ratios []float64
	for round := range max(1, rounds) {
		stopProfile := func() {}
		if round == 0 {
			stopProfile = profileVerify()
		}
		start := time.Now()
		report, err := engine.VerifyTenant(ctx, runtime, "verify-bench", engine.VerifyOptions{})
		stopProfile()
		if err != nil {
			return err
		}
		if !report.OK() || report.Records != int64(chainRows) {
			return fmt.Errorf("the bench chain did not verify: %+v", report.Break)
		}
		g := float64(chainRows) / time.Since(start).Seconds()

		start = time.Now()
		err = database.InTenant(ctx, runtime, "verify-bench", pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			return store.New(tx).AuditChainCopy(ctx, io.Discard, 0, 0)
		})
		if err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
		b := float64(chainRows) / time.Since(start).Seconds()
		governed, baseline, ratios = append(governed, g), append(baseline, b), append(ratios, g/b)
	}
	met := median(governed) >= 1_000_000 && median(ratios) >= 0.7
	emit(result{Name: "audit_verify_go", Value: round(median(governed)), Unit: "rows/s", Baseline: ptr(round(median(baseline))),
		Ratio: ptr(round2(median(ratios))), RatioMin: ptr(round2(slices.Min(ratios))), RatioMax: ptr(round2(slices.Max(ratios))), Rounds: len(ratios),
		Target: ">= 1000000 rows/s and ratio >= 0.7", Met: &met})

	start := time.Now()
	var problems int
	err := database.InTenant(ctx, runtime, "verify-bench", pgx.TxOptions{}, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, "SELECT count(*) FROM orangerail.audit_verify('verify-bench')").Scan(&problems)
	})
	if err != nil {
		return err
	}
	if problems != 0 {
		return fmt.Errorf("the SQL verifier found %d problems in the bench chain", problems)
	}
	emit(result{Name: "audit_verify_sql", Value: round(float64(chainRows) / time.Since(start).Seconds()), Unit: "rows/s"})
	return nil
}
