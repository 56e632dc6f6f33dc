// Package browsertest gives tests a real browser: Debian's chromium, started
// headless once per test process and driven through chromedp. Each test gets
// its own tab in its own browser context (its own cookies), so two calls to
// [New] are two people at two browsers.
//
// A missing browser FAILS the test, with the command that installs it; it
// never skips, so CI cannot pass without running the browser tests. `.ci/run`
// installs the browser when it is missing.
//
// Use it like this:
//
//	func TestMain(m *testing.M) { browsertest.Main(m) }
//
//	func TestSignIn(t *testing.T) {
//		ctx := browsertest.New(t)
//		if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil { … }
//	}
package browsertest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.uber.org/goleak"
)

// InstallCommand installs the browser on Debian, as root.
const InstallCommand = "apt-get update && apt-get install -y chromium"

// PathDefault is where Debian's chromium package puts the browser.
const PathDefault = "/usr/bin/chromium"

// TabTimeout bounds everything one test does in its tab, so a page that
// never loads fails the test instead of hanging the run.
const TabTimeout = 2 * time.Minute

// Path returns the browser to run: $CHROMIUM (a path or a name on $PATH)
// when set, else /usr/bin/chromium. The error says how to install it.
func Path() (string, error) {
	want := PathDefault
	if env := os.Getenv("CHROMIUM"); env != "" {
		want = env
	}
	path, err := exec.LookPath(want)
	if err != nil {
		return "", fmt.Errorf("browsertest: no browser at %s ($CHROMIUM chooses another): install Debian's chromium as root with `%s` (.ci/run does it): %w",
			want, InstallCommand, err)
	}
	return path, nil
}

// shared is the one browser of this test process.
var shared struct {
	once    sync.Once
	err     error
	ctx     context.Context // the browser's chromedp context
	stop    func()
	output  *lockedBuffer
	started bool
}

// start launches the browser on first use.
func start() error {
	shared.once.Do(func() {
		path, err := Path()
		if err != nil {
			shared.err = err
			return
		}
		shared.output = &lockedBuffer{}
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.WindowSize(1280, 900),
			chromedp.CombinedOutput(shared.output))
		if os.Geteuid() == 0 {
			// Chromium's sandbox refuses to run as root; CI containers run as root.
			opts = append(opts, chromedp.NoSandbox)
		}
		allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
		if err := chromedp.Do(browserCtx); err != nil {
			cancelBrowser()
			cancelAlloc()
			shared.err = fmt.Errorf("browsertest: start %s: %w\nbrowser output:\n%s", path, err, shared.output.String())
			return
		}
		shared.ctx, shared.started = browserCtx, true
		shared.stop = func() {
			closing, cancel := context.WithTimeout(browserCtx, 10*time.Second)
			defer cancel()
			_ = chromedp.Cancel(closing)
			cancelBrowser()
			cancelAlloc() // waits for the process to exit and removes its profile
		}
	})
	return shared.err
}

// New returns a chromedp context for a fresh tab, in a browser context of
// its own (no cookies shared with other tabs), in the process's browser;
// the browser starts on first use. The tab closes when the test ends. It
// fails t, never skips, when no browser is installed.
func New(t testing.TB) context.Context {
	t.Helper()
	if err := start(); err != nil {
		t.Fatal(err)
	}
	tab, closeTab := chromedp.NewContext(shared.ctx, chromedp.WithNewBrowserContext())
	ctx, cancel := context.WithTimeout(tab, TabTimeout)
	t.Cleanup(func() {
		cancel()
		closeTab()
	})
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("browsertest: open a tab: %v\nbrowser output:\n%s", err, shared.output.String())
	}
	return ctx
}

// Screenshot saves a PNG of the tab's whole page at path.
func Screenshot(ctx context.Context, t testing.TB, path string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("browsertest: screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Main runs the package's tests, stops the browser, and fails the run if a
// goroutine is left behind (goleak), as the other packages' TestMain do.
// Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Stop closes the process's browser, if it started. Main calls it; a
// TestMain that does not use Main must.
func Stop() {
	if shared.started {
		shared.stop()
		shared.started = false
	}
}

// lockedBuffer collects the browser's output for error messages. It keeps
// the first 64 KiB, where start-up errors are, and drops the rest.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := 64<<10 - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
