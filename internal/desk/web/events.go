package web

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/orangerail/orangerail/internal/errcode"
)

// heartbeatPolls is how many quiet polls pass between heartbeats.
const heartbeatPolls = 10

// MaxStreamsPerSession bounds the live lists one session holds open on a
// server at once. Each re-reads the database every poll, so one person's
// script opening streams without end would load the database without end;
// a person's browser keeps one a tab.
const MaxStreamsPerSession = 8

// streamCount counts the live lists each session holds open here.
type streamCount struct {
	mu sync.Mutex
	n  map[string]int
}

// take counts one more stream of session, and reports false, counting
// nothing, when it holds MaxStreamsPerSession already.
func (c *streamCount) take(session string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[session] >= MaxStreamsPerSession {
		return false
	}
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[session]++
	return true
}

// release counts one stream of session fewer.
func (c *streamCount) release(session string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[session]--; c.n[session] <= 0 {
		delete(c.n, session)
	}
}

// events streams the pending list as server-sent events: an event
// "pending" carrying the list's rows as HTML, at once and whenever the
// list changes. The list is re-read from the database every PollInterval,
// so an approval staged through any replica shows on every desk. The
// stream ends when the session does. A session holds at most
// MaxStreamsPerSession streams on this server; another is refused 429
// X_DESK_STREAMS_BUSY.
func (d *Desk) events(w http.ResponseWriter, r *http.Request, s *session) {
	if !d.streams.take(string(s.idHash)) {
		d.refuseIn(w, r, s, http.StatusTooManyRequests, errcode.DeskStreamsBusy,
			fmt.Sprintf("This sign-in already holds %d live lists open; this one will not update itself.", MaxStreamsPerSession))
		return
	}
	defer d.streams.release(string(s.idHash))
	ctx := r.Context()
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// A reconnecting browser waits this long (ms) before trying again.
	if _, err := fmt.Fprintf(w, "retry: %d\n\n", (2 * d.c.PollInterval).Milliseconds()); err != nil {
		return
	}
	_ = rc.Flush()
	tick := time.NewTicker(d.c.PollInterval)
	defer tick.Stop()
	last := ""
	for polls := 1; ; polls++ {
		if live, err := d.session(ctx, s.idHash); err != nil || live == nil {
			return // signed out, revoked, expired, or the database is gone: the page's next load says which
		}
		pending, err := d.pending(ctx, s.caller, "")
		if err != nil {
			if ctx.Err() == nil {
				d.log.WarnContext(ctx, "desk: the live list could not be read", "error", err)
			}
			return
		}
		var b bytes.Buffer
		if err := d.pages.ExecuteTemplate(&b, "rows", &page{Rows: d.rows(pending.Items)}); err != nil {
			d.log.ErrorContext(ctx, "desk: the live list did not render", "error", err)
			return
		}
		// The server's write timeout would cut a long stream; each poll
		// moves the deadline on.
		_ = rc.SetWriteDeadline(time.Now().Add(d.c.PollInterval + 30*time.Second))
		if html := b.String(); html != last {
			last = html
			var ev strings.Builder
			ev.WriteString("event: pending\n")
			for line := range strings.SplitSeq(strings.TrimRight(html, "\n"), "\n") {
				ev.WriteString("data: " + line + "\n")
			}
			ev.WriteString("\n")
			if _, err := w.Write([]byte(ev.String())); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		} else if polls%heartbeatPolls == 0 {
			// A comment line keeps proxies from closing a quiet stream.
			if _, err := w.Write([]byte(":\n\n")); err != nil || rc.Flush() != nil {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
