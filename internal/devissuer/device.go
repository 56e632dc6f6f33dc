package devissuer

import (
	"crypto/rand"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// deviceStatus is where a device grant stands.
type deviceStatus int

const (
	devicePending deviceStatus = iota
	deviceApproved
	deviceDenied
)

// deviceGrant is one device authorization (RFC 8628).
type deviceGrant struct {
	client    *client
	userCode  string // normalized: eight letters, no dash
	scope     string
	challenge string // optional PKCE
	expires   time.Time
	interval  time.Duration // grows by five seconds at each slow_down
	lastPoll  time.Time
	status    deviceStatus
	approval  issued // set when approved
}

// userCodeAlphabet is RFC 8628 6.1's: consonants only, so no code spells a
// word, and no letters that read like digits or each other (A, E, I, O, U,
// Y are out; there are no digits at all).
const userCodeAlphabet = "BCDFGHJKLMNPQRSTVWXZ"

const userCodeLength = 8

// newUserCode draws eight letters uniformly (bytes of 240 and above are
// redrawn, so every letter is equally likely).
func newUserCode() string {
	var b strings.Builder
	buf := make([]byte, 1)
	for b.Len() < userCodeLength {
		_, _ = rand.Read(buf)
		if buf[0] >= 240 {
			continue
		}
		b.WriteByte(userCodeAlphabet[int(buf[0])%len(userCodeAlphabet)])
	}
	return b.String()
}

// normalizeUserCode accepts what a person types (lower case, a dash,
// spaces) and returns the eight letters, or "" when it cannot be a code.
func normalizeUserCode(typed string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(typed) {
		switch {
		case r == '-' || r == ' ':
		case strings.ContainsRune(userCodeAlphabet, r):
			b.WriteRune(r)
		default:
			return ""
		}
	}
	if b.Len() != userCodeLength {
		return ""
	}
	return b.String()
}

// displayUserCode is XXXX-XXXX.
func displayUserCode(code string) string {
	return code[:4] + "-" + code[4:]
}

// deviceAuthorization starts a device grant (RFC 8628 3.1, 3.2).
func (i *Issuer) deviceAuthorization(w http.ResponseWriter, r *http.Request) {
	c, ok := i.clientPost(w, r)
	if !ok {
		return
	}
	form := r.PostForm
	if e := checkChallenge(form.Get("code_challenge"), form.Get("code_challenge_method"), false); e != nil {
		writeOAuthError(w, e)
		return
	}
	now := i.cfg.Now()
	deviceCode := randomToken()
	d := &deviceGrant{client: c, scope: form.Get("scope"), challenge: form.Get("code_challenge"),
		expires: now.Add(i.cfg.DeviceCodeTTL), interval: i.cfg.DevicePollInterval}
	i.mu.Lock()
	i.sweepLocked(now)
	full := len(i.devices) >= maxPending
	if !full {
		for d.userCode == "" || i.userCodes[d.userCode] != nil {
			d.userCode = newUserCode()
		}
		i.devices[deviceCode] = d
		i.userCodes[d.userCode] = d
	}
	i.mu.Unlock()
	if full {
		writeOAuthError(w, refuse(errTemporarilyUnavailable, "too many device grants are waiting"))
		return
	}
	verification := issuerURL(r) + "/device"
	writeJSON(w, http.StatusOK, map[string]any{
		"device_code":               deviceCode,
		"user_code":                 displayUserCode(d.userCode),
		"verification_uri":          verification,
		"verification_uri_complete": verification + "?" + url.Values{"user_code": {displayUserCode(d.userCode)}}.Encode(),
		"expires_in":                int64(i.cfg.DeviceCodeTTL / time.Second),
		"interval":                  int64(i.cfg.DevicePollInterval / time.Second),
	})
}

// pollDevice is the device_code grant (RFC 8628 3.4, 3.5). A device that
// polls sooner than its interval (less a fifth, for network jitter) hears
// slow_down, and its interval grows by five seconds from then on, as the
// client's does.
func (i *Issuer) pollDevice(c *client, form url.Values) (*issued, *oauthError) {
	deviceCode := form.Get("device_code")
	if deviceCode == "" {
		return nil, refuse(errInvalidRequest, "device_code is missing")
	}
	now := i.cfg.Now()
	i.mu.Lock()
	defer i.mu.Unlock()
	d := i.devices[deviceCode]
	switch {
	case d == nil:
		return nil, refuse(errInvalidGrant, "the device code is unknown or already used")
	case d.client != c:
		return nil, refuse(errInvalidGrant, "the device code was issued to another client")
	case !now.Before(d.expires):
		i.dropDeviceLocked(deviceCode, d)
		return nil, refuse(errExpiredToken, "the device code expired; start again")
	}
	tooSoon := !d.lastPoll.IsZero() && now.Sub(d.lastPoll) < d.interval-d.interval/5
	d.lastPoll = now
	if tooSoon {
		d.interval += 5 * time.Second
		return nil, refuse(errSlowDown, "poll less often")
	}
	switch d.status {
	case devicePending:
		return nil, refuse(errAuthorizationPending, "the person has not answered yet")
	case deviceDenied:
		i.dropDeviceLocked(deviceCode, d)
		return nil, refuse(errAccessDenied, "the person denied the device")
	}
	i.dropDeviceLocked(deviceCode, d)
	if d.challenge != "" && !verifierMatches(form.Get("code_verifier"), d.challenge) {
		return nil, refuse(errInvalidGrant, "code_verifier does not match the code_challenge")
	}
	approval := d.approval
	return &approval, nil
}

func (i *Issuer) dropDeviceLocked(deviceCode string, d *deviceGrant) {
	delete(i.devices, deviceCode)
	delete(i.userCodes, d.userCode)
}

// devicePage shows the form where a person enters a user code, signs in and
// answers. verification_uri_complete fills the code in.
func (i *Issuer) devicePage(w http.ResponseWriter, r *http.Request) {
	typed := r.URL.Query().Get("user_code")
	if code := normalizeUserCode(typed); code != "" {
		typed = displayUserCode(code)
	}
	i.showDevice(w, r, http.StatusOK, typed, "", "")
}

func (i *Issuer) showDevice(w http.ResponseWriter, r *http.Request, status int, userCode, username, problem string) {
	browser := browserID(w, r)
	render(w, status, "device", "", page{Title: "Connect a device", Error: problem,
		CSRF: i.csrfToken("device", browser), UserCode: userCode, Username: username})
}

// deviceSubmit checks the person's login and records the answer for the
// user code.
func (i *Issuer) deviceSubmit(w http.ResponseWriter, r *http.Request) {
	if e := parsePost(w, r); e != nil {
		showError(w, http.StatusBadRequest, "The form could not be read.")
		return
	}
	if !i.checkCSRF(r, "device") {
		showError(w, http.StatusForbidden, "This form was not loaded by this browser. Open the device page again.")
		return
	}
	form := r.PostForm
	typed, username := form.Get("user_code"), form.Get("username")
	var decision deviceStatus
	switch form.Get("decision") {
	case "approve":
		decision = deviceApproved
	case "deny":
		decision = deviceDenied
	default:
		i.showDevice(w, r, http.StatusBadRequest, typed, username, "Choose approve or deny.")
		return
	}
	a, ok := i.authenticate(username, form.Get("password"))
	if !ok {
		i.showDevice(w, r, http.StatusUnauthorized, typed, username, "Wrong username or password.")
		return
	}
	now := i.cfg.Now()
	code := normalizeUserCode(typed)
	i.mu.Lock()
	d := i.userCodes[code]
	answerable := d != nil && d.status == devicePending && now.Before(d.expires)
	if answerable {
		d.status = decision
		d.approval = issued{account: a, scope: d.scope, authTime: now}
	}
	i.mu.Unlock()
	if !answerable {
		i.showDevice(w, r, http.StatusBadRequest, typed, username,
			"That code is unknown, expired or already answered. Check the code your device shows.")
		return
	}
	message := "You approved " + d.client.id + ". You can go back to your device."
	if decision == deviceDenied {
		message = "You denied " + d.client.id + ". The device gets nothing."
	}
	render(w, http.StatusOK, "message", "", page{Title: "Done", Message: message})
}
