package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/orangerail/orangerail/internal/jcs"
)

// benchRecords are records as a governed cycle writes them: a stage's,
// an execution's start (with the target's state), its end, and an
// effect's attempt.
func benchRecords() []*Record {
	id := uuid.MustParse("0f8fad5b-d9cb-469f-a165-70867728950e")
	at := time.Date(2026, 12, 1, 16, 30, 0, 123456789, time.UTC)
	agent := Actor{Subject: "agent-7", Kind: ActorAgent, Issuer: "https://issuer.example"}
	input := json.RawMessage(`{"address":"1 Bench Street","order_id":"bench-1"}`)
	return []*Record{
		{Tenant: "acme", At: at, CorrelationID: id.String(), Phase: PhaseStaged, Action: "update_shipping_address", Actor: agent, ApprovalID: &id, Input: input},
		{Tenant: "acme", At: at, CorrelationID: id.String(), Phase: PhaseExecutionStarted, Action: "update_shipping_address", Actor: agent, ApprovalID: &id, Input: input,
			Prior: json.RawMessage(`{"created_at": "2026-11-30T10:00:00Z", "customer_id": "c-1", "id": "bench-1", "shipping_address": "somewhere", "status": "paid", "total_cents": 100}`)},
		{Tenant: "acme", At: at, CorrelationID: id.String(), Phase: PhaseExecutionSucceeded, Action: "update_shipping_address", Actor: agent, ApprovalID: &id,
			Result: json.RawMessage(`{"rows_affected": 1}`)},
		{Tenant: "acme", At: at, CorrelationID: id.String(), Phase: PhaseEffectAttempt, Action: "create_return_label", Actor: agent, ApprovalID: &id,
			Attempt: &EffectAttempt{Number: 2, Status: 503, Failure: AttemptStatus, Sent: true, Duration: 1500 * time.Millisecond}, Error: "upstream answered 503"},
	}
}

// BenchmarkEntry encodes the records of benchRecords.
func BenchmarkEntry(b *testing.B) {
	recs := benchRecords()
	b.ReportAllocs()
	for b.Loop() {
		for _, r := range recs {
			if _, err := r.Entry(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// marshalledEntry is the record's entry as Entry made it before it wrote
// the entry in one pass: jcs.Marshal of its wire form. Kept as the oracle
// Entry is held to.
func marshalledEntry(r *Record) ([]byte, error) {
	if r.At.IsZero() {
		return nil, errors.New("audit record has no time")
	}
	prior, err := lossless(r.Prior)
	if err != nil {
		return nil, err
	}
	result, err := lossless(r.Result)
	if err != nil {
		return nil, err
	}
	type attemptEntry struct {
		Number     int            `json:"number"`
		Status     int            `json:"status,omitempty"`
		Failure    AttemptFailure `json:"failure,omitempty"`
		Sent       bool           `json:"sent"`
		DurationMS int64          `json:"duration_ms"`
		Key        string         `json:"idempotency_key,omitempty"`
	}
	var attempt *attemptEntry
	if a := r.Attempt; a != nil {
		attempt = &attemptEntry{Number: a.Number, Status: a.Status, Failure: a.Failure, Sent: a.Sent, DurationMS: a.Duration.Milliseconds(), Key: a.IdempotencyKey}
	}
	return jcs.Marshal(&struct {
		V             int             `json:"v"`
		Tenant        string          `json:"tenant"`
		At            string          `json:"at"`
		CorrelationID string          `json:"correlation_id"`
		Phase         Phase           `json:"phase"`
		Action        string          `json:"action,omitempty"`
		Actor         Actor           `json:"actor"`
		DevMode       bool            `json:"dev_mode"`
		ApprovalID    *uuid.UUID      `json:"approval_id,omitempty"`
		Input         json.RawMessage `json:"input,omitempty"`
		InputDigest   string          `json:"input_digest,omitempty"`
		Prior         json.RawMessage `json:"prior,omitempty"`
		Result        json.RawMessage `json:"result,omitempty"`
		Error         string          `json:"error,omitempty"`
		Diagnostic    string          `json:"diagnostic,omitempty"`
		Attempt       *attemptEntry   `json:"attempt,omitempty"`
	}{
		V: AuditVersion, Tenant: r.Tenant, At: r.At.UTC().Truncate(time.Microsecond).Format(atLayout), CorrelationID: r.CorrelationID,
		Phase: r.Phase, Action: r.Action, Actor: r.Actor, DevMode: r.DevMode, ApprovalID: r.ApprovalID, Input: r.Input,
		InputDigest: r.InputDigest, Prior: prior, Result: result, Error: storable(r.Error), Diagnostic: r.Diagnostic, Attempt: attempt,
	})
}

// sameEntry fails t unless Entry and the oracle agree on r: the same
// bytes, or both refuse it.
func sameEntry(t *testing.T, r *Record) {
	t.Helper()
	got, err := r.Entry()
	want, wantErr := marshalledEntry(r)
	if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
		t.Fatalf("Entry() = %s, %v\nmarshalled %s, %v", got, err, want, wantErr)
	}
}

// TestEntryIsTheMarshalledForm: Entry writes every record as jcs.Marshal
// of its wire form did — the chain's bytes do not change — and refuses
// what it refused.
func TestEntryIsTheMarshalledForm(t *testing.T) {
	for _, r := range benchRecords() {
		sameEntry(t, r)
	}
	id := uuid.New()
	at := time.Date(2026, 2, 3, 4, 5, 6, 7891, time.FixedZone("x", 3600))
	for name, edit := range map[string]func(r *Record){
		"nothing optional": func(r *Record) {
			r.Action, r.ApprovalID, r.Input, r.Actor.Issuer = "", nil, nil, ""
		},
		"dev mode, no approval": func(r *Record) { r.DevMode, r.ApprovalID = true, nil },
		"strings to escape":     func(r *Record) { r.Tenant, r.Action = "a\"b\\c\n\t\x01\x1f\x7f", "<>&\u2028\u2029é😀" },
		"invalid UTF-8":         func(r *Record) { r.CorrelationID, r.Actor.Subject = "a\xffb\xc3", "\xe2\x82" },
		"a surrogate's bytes":   func(r *Record) { r.Diagnostic = "\xed\xa0\x80x" },
		"NUL in the error":      func(r *Record) { r.Error = "a\x00b" },
		"an input to canonicalize": func(r *Record) {
			r.Input = json.RawMessage(` { "b" : [1.0, 1e2, -0, "\u00e9\/"], "a": {"z": null, "\u0061a": true} } `)
		},
		"an input not I-JSON":           func(r *Record) { r.Input = json.RawMessage(`{"a": 1, "a": 2}`) },
		"an input of an inexact number": func(r *Record) { r.Input = json.RawMessage(`{"n": 9007199254740993}`) },
		"an input of null":              func(r *Record) { r.Input = json.RawMessage(`null`) },
		"an input that is not JSON":     func(r *Record) { r.Input = json.RawMessage(`{`) },
		"a prior of a bigint":           func(r *Record) { r.Prior = json.RawMessage(`{"n": 12345678901234567890, "x": 0.1}`) },
		"a result of an array":          func(r *Record) { r.Result = json.RawMessage(`[3, "two", {"one": 1}]`) },
		"an attempt with no status":     func(r *Record) { r.Attempt = &EffectAttempt{Number: 1, Failure: AttemptConnect} },
		"an attempt with a key": func(r *Record) {
			r.Attempt = &EffectAttempt{Number: 2, Status: 503, Sent: true, IdempotencyKey: "k-\"1\"\u2028"}
		},
		"an attempt of the longest duration": func(r *Record) {
			r.Attempt = &EffectAttempt{Number: 1, Duration: math.MaxInt64}
		},
		"an attempt numbered 2^53+2": func(r *Record) { r.Attempt = &EffectAttempt{Number: 1<<53 + 2} },
		"an attempt numbered 2^62":   func(r *Record) { r.Attempt = &EffectAttempt{Number: 1 << 62, Status: math.MinInt64} },
		"an attempt of a number no double holds": func(r *Record) {
			r.Attempt = &EffectAttempt{Number: 1<<53 + 1}
		},
		"an attempt of a negative number": func(r *Record) { r.Attempt = &EffectAttempt{Number: -3, Status: -1} },
		"no time":                         func(r *Record) { r.At = time.Time{} },
	} {
		t.Run(name, func(t *testing.T) {
			r := &Record{Tenant: "acme", At: at, CorrelationID: "c-1", Phase: PhaseStaged, Action: "cancel_order",
				Actor: Actor{Subject: "agent-7", Kind: ActorAgent, Issuer: "https://issuer"}, ApprovalID: &id,
				Input: json.RawMessage(`{"order_id":"o-1"}`)}
			edit(r)
			sameEntry(t, r)
		})
	}
}

// FuzzEntry holds Entry to the marshalled form for any record.
func FuzzEntry(f *testing.F) {
	f.Add("acme", "c-1", "staged", "cancel_order", "agent-7", "agent", "", false, []byte{}, []byte(`{"a":1}`), []byte{}, []byte{}, "", "", "", 0, 0, "", false, int64(0), int64(1764606000123456789))
	f.Add("t\xff", "\x00", "effect_attempt", "", "s", "human", "iss", true, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, []byte(`[1e400]`),
		[]byte(`{"n":12345678901234567890}`), []byte(`"x"`), "ab12", "e\u2028", "d", 2, 503, "status", true, int64(1500), int64(-1))
	f.Fuzz(func(t *testing.T, tenant, correlation, phase, action, subject, kind, issuer string, dev bool, approval, input, prior, result []byte,
		digest, errText, diagnostic string, number, status int, failure string, sent bool, durationMS, atNanos int64) {
		r := &Record{Tenant: tenant, At: time.Unix(0, atNanos), CorrelationID: correlation, Phase: Phase(phase), Action: action,
			Actor: Actor{Subject: subject, Kind: ActorKind(kind), Issuer: issuer}, DevMode: dev,
			Input: input, Prior: prior, Result: result, InputDigest: digest, Error: errText, Diagnostic: diagnostic}
		if id, err := uuid.FromBytes(approval); err == nil {
			r.ApprovalID = &id
		}
		if number != 0 || status != 0 || failure != "" || sent || durationMS != 0 {
			r.Attempt = &EffectAttempt{Number: number, Status: status, Failure: AttemptFailure(failure), Sent: sent, Duration: time.Duration(durationMS) * time.Millisecond}
		}
		sameEntry(t, r)
	})
}
