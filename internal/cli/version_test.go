package cli

import (
	"bytes"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersion: `orangerail version` prints the stamped version first (what
// deploy/build.sh checks of the image's binary), then the toolchain and
// the revision the build recorded; unstamped, a version the go command
// recorded stands in, and nothing recorded prints dev.
func TestVersion(t *testing.T) {
	t.Parallel()
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "4d38887aa"}, {Key: "vcs.time", Value: "2026-11-30T22:00:00Z"}, {Key: "vcs.modified", Value: "true"}}
	tests := []struct {
		name    string
		stamped string
		info    *debug.BuildInfo
		want    string
	}{
		{"stamped", "v1.2.3", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "(devel)"}, Settings: vcs},
			"orangerail v1.2.3\ngo: go1.26.1\nrevision: 4d38887aa (modified)\ncommitted: 2026-11-30T22:00:00Z\n"},
		{"stamped over the module's", "v1.2.3", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "v0.9.0"}},
			"orangerail v1.2.3\ngo: go1.26.1\nrevision: unknown (built without version control information)\n"},
		{"go install", "dev", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "v0.9.0"}},
			"orangerail v0.9.0\ngo: go1.26.1\nrevision: unknown (built without version control information)\n"},
		{"unstamped", "dev", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "(devel)"}, Settings: vcs[:1]},
			"orangerail dev\ngo: go1.26.1\nrevision: 4d38887aa\n"},
		{"no build info", "dev", nil,
			"orangerail dev\ngo: " + runtime.Version() + "\nrevision: unknown (built without version control information)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			factsOf(tt.stamped, tt.info).print(&out)
			if out.String() != tt.want {
				t.Fatalf("printed\n%s\nwant\n%s", out.String(), tt.want)
			}
		})
	}
	t.Run("command", func(t *testing.T) {
		t.Parallel()
		code, stdout, stderr := cli(t, "version")
		if code != exitOK || stderr != "" {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		if want := "orangerail " + readBuildFacts().Version + "\ngo: " + runtime.Version() + "\n"; !strings.HasPrefix(stdout, want) {
			t.Fatalf("printed\n%s\nwant it to start\n%s", stdout, want)
		}
	})
}
