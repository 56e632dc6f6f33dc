package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/orangerail/orangerail/internal/devdb"
	"github.com/orangerail/orangerail/internal/testdb"
)

// TestDemoServesTheDesk runs the demo as `make run` does and signs in to
// the desk it prints with a login it printed, through the development
// issuer's own login page: the facts name the desk and the logins, and
// they work.
func TestDemoServesTheDesk(t *testing.T) {
	t.Chdir(t.TempDir()) // the demo keeps its state in ./.orangerail
	dbURL := testdb.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	found := &devdb.Database{URL: dbURL, Source: devdb.SourceEnv}
	if err := seedExample(ctx, dbURL); err != nil {
		t.Fatal(err)
	}
	facts, err := newDemoFacts(found)
	if err != nil {
		t.Fatal(err)
	}
	factsPath := filepath.Join(demoStateDir, "demo.json")
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- serveDemo(ctx, &out, found, facts, factsPath, "127.0.0.1:0", "") }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the demo: %v", err)
		}
	}()
	var written demoFacts
	for deadline := time.Now().Add(30 * time.Second); ; {
		if b, err := os.ReadFile(factsPath); err == nil && json.Unmarshal(b, &written) == nil && written.DeskURL != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the demo wrote no desk_url")
		}
		time.Sleep(20 * time.Millisecond)
	}
	login, ok := written.Logins["approver"]["acme"]
	if !ok || login.Username == "" || login.Password == "" {
		t.Fatalf("logins = %+v", written.Logins)
	}

	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	resp, err := client.Get(written.DeskURL) // → the desk's sign-in → the issuer's login page
	if err != nil {
		t.Fatal(err)
	}
	page := readAll(t, resp)
	hidden := map[string]string{}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="(\w+)" value="([^"]*)">`).FindAllStringSubmatch(page, -1) {
		hidden[m[1]] = html.UnescapeString(m[2])
	}
	if hidden["request"] == "" || hidden["csrf"] == "" {
		t.Fatalf("no login form at %s:\n%s", resp.Request.URL, page)
	}
	form := url.Values{"request": {hidden["request"]}, "csrf": {hidden["csrf"]}, "username": {login.Username},
		"password": {login.Password}, "action": {"sign_in"}}
	resp, err = client.PostForm(resp.Request.URL.String(), form) // → the desk's callback → the desk
	if err != nil {
		t.Fatal(err)
	}
	page = readAll(t, resp)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Request.URL.String(), written.DeskURL) || !strings.Contains(page, "Pending approvals") {
		t.Fatalf("after signing in: %d at %s\n%s", resp.StatusCode, resp.Request.URL, page)
	}
	if !strings.Contains(out.String(), written.DeskURL) || !strings.Contains(out.String(), login.Password) {
		t.Fatalf("the demo did not print the desk and its logins:\n%s", out.String())
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
