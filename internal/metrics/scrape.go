package metrics

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// readTimeout bounds each read of the database at a scrape.
const readTimeout = 5 * time.Second

// scraped is the collector of what is read at each scrape rather than
// counted from events: the pools' stats (pool.Stat) and the sealing lag,
// a state of the database that every replica shares.
type scraped struct {
	defs    map[string]Definition
	pools   map[string]*pgxpool.Pool
	sealLag func(context.Context) (time.Duration, error)
	pending func(context.Context) (int, time.Duration, error)
	log     *slog.Logger
}

func (s *scraped) desc(name string) *prometheus.Desc {
	d := s.defs[name]
	return prometheus.NewDesc(d.Name, d.Help, d.Labels, nil)
}

var _ prometheus.Collector = (*scraped)(nil)

// Describe sends every series' description.
func (s *scraped) Describe(ch chan<- *prometheus.Desc) {
	for _, name := range []string{PoolConns, PoolMaxConns, PoolAcquires, PoolEmptyAcquires, PoolCanceledAcquire, PoolAcquireWait, PoolNewConns, AuditSealLag, ApprovalsPending, ApprovalOldestWait} {
		ch <- s.desc(name)
	}
}

// Collect reads the pools, the sealing lag and the approvals waiting.
func (s *scraped) Collect(ch chan<- prometheus.Metric) {
	for _, name := range slices.Sorted(maps.Keys(s.pools)) {
		p := s.pools[name]
		if p == nil {
			continue
		}
		st := p.Stat()
		gauge := func(metric string, v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(s.desc(metric), prometheus.GaugeValue, v, append([]string{name}, labels...)...)
		}
		counter := func(metric string, v float64) {
			ch <- prometheus.MustNewConstMetric(s.desc(metric), prometheus.CounterValue, v, name)
		}
		gauge(PoolConns, float64(st.AcquiredConns()), "acquired")
		gauge(PoolConns, float64(st.IdleConns()), "idle")
		gauge(PoolConns, float64(st.ConstructingConns()), "constructing")
		gauge(PoolMaxConns, float64(st.MaxConns()))
		counter(PoolAcquires, float64(st.AcquireCount()))
		counter(PoolEmptyAcquires, float64(st.EmptyAcquireCount()))
		counter(PoolCanceledAcquire, float64(st.CanceledAcquireCount()))
		counter(PoolAcquireWait, st.AcquireDuration().Seconds())
		counter(PoolNewConns, float64(st.NewConnsCount()))
	}
	s.collectSealLag(ch)
	s.collectPending(ch)
}

// collectSealLag reads the sealing lag.
func (s *scraped) collectSealLag(ch chan<- prometheus.Metric) {
	if s.sealLag == nil {
		return
	}
	s.read("the sealing lag", func(ctx context.Context) error {
		lag, err := s.sealLag(ctx)
		if err == nil {
			ch <- prometheus.MustNewConstMetric(s.desc(AuditSealLag), prometheus.GaugeValue, lag.Seconds())
		}
		return err
	})
}

// collectPending reads the approvals waiting for a person.
func (s *scraped) collectPending(ch chan<- prometheus.Metric) {
	if s.pending == nil {
		return
	}
	s.read("the approvals waiting", func(ctx context.Context) error {
		n, oldest, err := s.pending(ctx)
		if err == nil {
			ch <- prometheus.MustNewConstMetric(s.desc(ApprovalsPending), prometheus.GaugeValue, float64(n))
			ch <- prometheus.MustNewConstMetric(s.desc(ApprovalOldestWait), prometheus.GaugeValue, oldest.Seconds())
		}
		return err
	})
}

// read runs one read of the database within readTimeout. A read that
// fails leaves its series out of the scrape (the handler continues on
// error); the host log says why, the scraper's own error says nothing of
// the database.
func (s *scraped) read(what string, f func(ctx context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	if err := f(ctx); err != nil {
		s.log.Warn("metrics: "+what+" could not be read", "error", err)
	}
}
