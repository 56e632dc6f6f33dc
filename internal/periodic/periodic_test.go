package periodic_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/logbuf"
	"github.com/orangerail/orangerail/internal/periodic"
)

// TestARunOfFailuresIsToldOnce: rounds that fail in a row are told once
// (their first failure) within a quiet period, every one reaches OnError,
// and the round that works again says how many failed; rounds run when
// kicked, and at once when asked.
func TestARunOfFailuresIsToldOnce(t *testing.T) {
	var out logbuf.Buffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	kick := make(chan struct{})
	ran := make(chan int)
	results := []error{errors.New("down"), errors.New("down"), errors.New("down"), errors.New("down"), nil, errors.New("again")}
	var heard []error
	round := 0
	loop := periodic.Start(periodic.Config{Interval: time.Hour, Immediately: true, Kick: kick, Log: log, What: "sealing", Quiet: time.Hour,
		OnError: func(err error) { heard = append(heard, err) }}, func(ctx context.Context) error {
		round++
		ran <- round
		if round > len(results) {
			// The last round holds until Stop: the round before it was
			// told before this one began, and this one, cut short, is not.
			<-ctx.Done()
			return ctx.Err()
		}
		return results[round-1]
	})
	if n := <-ran; n != 1 {
		t.Fatalf("the immediate round is round %d", n)
	}
	for want := 2; want <= len(results)+1; want++ {
		kick <- struct{}{}
		if n := <-ran; n != want {
			t.Fatalf("a kick ran round %d, want %d", n, want)
		}
	}
	loop.Stop()
	loop.Stop() // again: a no-op
	lines := out.Lines()
	want := []string{`msg="sealing failed; it is retried" error=down`, `msg="sealing works again" failed_rounds=4`, `msg="sealing failed; it is retried" error=again`}
	if len(lines) != len(want) {
		t.Fatalf("log:\n%s\nwant %d lines", strings.Join(lines, "\n"), len(want))
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d: %s\nwant it to hold %s", i, lines[i], w)
		}
	}
	if len(heard) != 5 {
		t.Errorf("OnError heard %d failures, want 5", len(heard))
	}
}

// TestFailuresAreRetoldAfterTheQuietPeriod: a run of failures longer than
// the quiet period is told again, with how many failed since.
func TestFailuresAreRetoldAfterTheQuietPeriod(t *testing.T) {
	var out logbuf.Buffer
	kick := make(chan struct{})
	ran := make(chan struct{})
	rounds := 0
	loop := periodic.Start(periodic.Config{Interval: time.Hour, Kick: kick, Log: slog.New(slog.NewTextHandler(&out, nil)), What: "flush",
		Quiet: time.Nanosecond}, func(ctx context.Context) error {
		rounds++
		ran <- struct{}{}
		if rounds > 3 {
			// Holds until Stop: the third round was told before this began.
			<-ctx.Done()
			return ctx.Err()
		}
		time.Sleep(time.Millisecond) // past the quiet period
		return errors.New("down")
	})
	for range 4 {
		kick <- struct{}{}
		<-ran
	}
	loop.Stop()
	lines := out.Lines()
	if len(lines) != 3 || !strings.Contains(lines[0], `msg="flush failed; it is retried"`) ||
		!strings.Contains(lines[2], `msg="flush still fails; it is retried" error=down failed_rounds_since_last_report=1`) {
		t.Fatalf("log:\n%s", strings.Join(lines, "\n"))
	}
}

// TestAFailureAfterStopIsNotTold: a round cut short by Stop failed only
// because it was stopped.
func TestAFailureAfterStopIsNotTold(t *testing.T) {
	var out logbuf.Buffer
	started := make(chan struct{})
	var told int
	loop := periodic.Start(periodic.Config{Interval: time.Hour, Immediately: true, Log: slog.New(slog.NewTextHandler(&out, nil)), What: "seal",
		OnError: func(error) { told++ }}, func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})
	<-started
	loop.Stop()
	if told != 0 || strings.TrimSpace(out.String()) != "" {
		t.Fatalf("a stopped round was told: %d, %q", told, out.String())
	}
}
