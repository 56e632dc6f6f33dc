package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/orangerail/orangerail/internal/database"
	"github.com/orangerail/orangerail/internal/engine"
	"github.com/orangerail/orangerail/internal/errcode"
	"github.com/orangerail/orangerail/internal/store"
)

// session is a signed-in person as a request sees them.
type session struct {
	idHash    []byte
	caller    *engine.Caller
	issuer    string
	formToken string
	expires   time.Time
}

// cookieName is the session cookie's name: __Host- prefixed when the desk
// is served over https, which pins it to this host and path / and
// requires Secure.
func (d *Desk) cookieName(base string) string {
	if d.secure {
		return "__Host-" + base
	}
	return base
}

const (
	sessionCookie = "orangerail_desk"
	loginCookie   = "orangerail_desk_login"
)

// setCookie sets a cookie as every desk cookie is set: HttpOnly, SameSite
// Lax (the issuer's redirect back is a cross-site top-level GET that must
// carry the sign-in cookie), path /, Secure outside loopback.
func (d *Desk) setCookie(w http.ResponseWriter, base, value string, maxAge time.Duration) {
	c := &http.Cookie{Name: d.cookieName(base), Value: value, Path: "/", HttpOnly: true, Secure: d.secure, //nolint:gosec // G124: Secure is off only on a loopback http desk, where a Secure cookie would never be sent
		SameSite: http.SameSiteLaxMode, MaxAge: int(maxAge / time.Second)}
	if maxAge < 0 {
		c.MaxAge = -1
	}
	http.SetCookie(w, c)
}

// randomToken returns a secret of 128 random bits.
func randomToken() string { return rand.Text() }

// hashID is what the database keeps of a session id.
func hashID(id string) []byte {
	h := sha256.Sum256([]byte(id))
	return h[:]
}

// sessions runs fn on the desk's sessions, in a transaction of no tenant:
// it acts as orangerail_runtime on whichever connection a pooler hands it.
func (d *Desk) sessions(ctx context.Context, fn func(*store.Store) error) error {
	return database.Tenantless(ctx, d.c.Store, pgx.TxOptions{}, func(tx pgx.Tx) error { return fn(store.New(tx)) })
}

// session reads the session of idHash.
func (d *Desk) session(ctx context.Context, idHash []byte) (s *store.DeskSession, err error) {
	err = d.sessions(ctx, func(st *store.Store) error {
		s, err = st.DeskSessionGet(ctx, idHash)
		return err
	})
	return s, err
}

// startSession stores a session for the person and sets its cookie. The
// session the browser held before, if any, ends: a browser signed in again
// (as the same person or another) is in one session, and the cookie it
// replaces, wherever a copy of it went, opens nothing.
func (d *Desk) startSession(ctx context.Context, w http.ResponseWriter, r *http.Request, caller *engine.Caller, issuer string, tokenExpires time.Time) error {
	raw, err := json.Marshal(caller)
	if err != nil {
		return err
	}
	expires := time.Now().Add(d.c.SessionTTL)
	// The roles came with the token: a session that outlived it would keep
	// roles the provider may since have taken away.
	if !tokenExpires.IsZero() && tokenExpires.Before(expires) {
		expires = tokenExpires
	}
	id := randomToken()
	err = d.sessions(ctx, func(st *store.Store) error {
		// A browser holds one session cookie; a request sending more is
		// heard for the first few only, each a statement.
		olds := r.CookiesNamed(d.cookieName(sessionCookie))
		for _, old := range olds[:min(len(olds), 4)] {
			if err := st.DeskSessionRevoke(ctx, hashID(old.Value)); err != nil {
				return err
			}
		}
		return st.DeskSessionCreate(ctx, &store.DeskSession{IDHash: hashID(id), TenantID: caller.Tenant,
			Subject: caller.Subject, Issuer: issuer, Caller: raw, FormToken: randomToken(), ExpiresAt: expires})
	})
	if err != nil {
		return err
	}
	d.setCookie(w, sessionCookie, id, time.Until(expires))
	// Sign-ins are rare; each forgets the sessions that ended long ago.
	if err := d.sessions(ctx, func(st *store.Store) error { return st.DeskSessionPrune(ctx) }); err != nil {
		d.log.WarnContext(ctx, "desk: old sessions could not be pruned", "error", err)
	}
	return nil
}

// loadSession returns the request's live session, or nil when it has none
// (no cookie, an id the database does not hold, an expired or revoked
// session).
func (d *Desk) loadSession(ctx context.Context, r *http.Request) (*session, error) {
	cookies := r.CookiesNamed(d.cookieName(sessionCookie))
	if len(cookies) != 1 || cookies[0].Value == "" {
		return nil, nil //nolint:nilnil // no session (or an ambiguous pair of cookies) is not an error
	}
	s, err := d.session(ctx, hashID(cookies[0].Value))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil //nolint:nilnil // no session is not an error
	}
	if err != nil {
		return nil, err
	}
	// A session begun at another issuer than the one configured now (the
	// deployment moved to another identity provider) names a person the
	// desk no longer verifies: it is no session.
	if s.Issuer != d.c.Ontology.Identity.OIDC.Issuer {
		return nil, nil //nolint:nilnil // a session of another issuer is no session, not an error
	}
	var caller engine.Caller
	if err := json.Unmarshal(s.Caller, &caller); err != nil {
		return nil, err
	}
	return &session{idHash: s.IDHash, caller: &caller, issuer: s.Issuer, formToken: s.FormToken, expires: s.ExpiresAt}, nil
}

type sessionHandler func(w http.ResponseWriter, r *http.Request, s *session)

// withSession serves h only to a signed-in person. Without a session, a
// page GET is sent to sign in; anything else is refused. A POST must carry
// the session's form token.
func (d *Desk) withSession(h sessionHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := d.loadSession(r.Context(), r)
		if err != nil {
			d.failed(w, r, "read the session", err)
			return
		}
		if s == nil {
			d.setCookie(w, sessionCookie, "", -1)
			if r.Method == http.MethodGet && r.URL.Path != Path+"/events" {
				http.Redirect(w, r, Path+"/signin?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther) //nolint:gosec // G710: a path of this desk; the request's URI is only its query
				return
			}
			d.refuse(w, r, http.StatusUnauthorized, signInRequiredCode, "Sign in again: there is no session, or it ended.")
			return
		}
		// A session is bound to the networks its token was
		// (identity.allowed_networks), on every request, not only at
		// sign-in: a session cookie carried elsewhere is refused there.
		if err := d.c.Resolver.AdmitNetwork(r.Context()); err != nil {
			d.log.WarnContext(r.Context(), "desk request refused", "subject", s.caller.Subject, "error", err.Error())
			d.refuse(w, r, http.StatusForbidden, errcode.IdentityNetworkRefused, "This session may not be used from this network.")
			return
		}
		if !d.mayReview(s.caller) && r.URL.Path != Path+"/signout" {
			d.refuseIn(w, r, s, http.StatusForbidden, errcode.Forbidden, "The desk is for approvers and auditors; you hold neither role.")
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
			if subtle.ConstantTimeCompare([]byte(r.PostFormValue("form_token")), []byte(s.formToken)) != 1 {
				d.refuseIn(w, r, s, http.StatusForbidden, formRefusedCode, "This form did not come from your desk page; it was not submitted. Reload the page and try again.")
				return
			}
		}
		h(w, r, s)
	}
}

// maxFormBytes caps a form: a note and a few fields.
const maxFormBytes = 64 << 10

func (d *Desk) signOut(w http.ResponseWriter, r *http.Request, s *session) {
	if err := d.sessions(r.Context(), func(st *store.Store) error { return st.DeskSessionRevoke(r.Context(), s.idHash) }); err != nil {
		d.failed(w, r, "end the session", err)
		return
	}
	d.setCookie(w, sessionCookie, "", -1)
	d.render(w, r, http.StatusOK, "signedout.html", &page{Title: "Signed out"})
}
