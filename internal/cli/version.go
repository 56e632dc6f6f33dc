package cli

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is orangerail's version, stamped at build time by deploy/build.sh
// (-ldflags -X); unstamped, it is "dev" and buildFacts looks further.
var version = "dev"

// buildFacts is what `orangerail version` prints: the version, the Go
// toolchain and the source revision the binary was built from.
type buildFacts struct {
	Version   string
	GoVersion string
	// Revision is the VCS commit, empty when the build recorded none
	// (-buildvcs=false, or a tree outside version control); Modified
	// says the tree had uncommitted changes.
	Revision string
	Modified bool
	// Time is the commit's time as the build recorded it.
	Time string
}

// readBuildFacts reads what this binary's build recorded.
func readBuildFacts() buildFacts {
	info, _ := debug.ReadBuildInfo()
	return factsOf(version, info)
}

// factsOf is what a build stamped with the version stamped recorded in
// info (nil: nothing). The stamped version wins; unstamped ("dev"), a
// module version the go command recorded (go install …@v1.2.3) is used.
func factsOf(stamped string, info *debug.BuildInfo) buildFacts {
	f := buildFacts{Version: stamped, GoVersion: runtime.Version()}
	if info == nil {
		return f
	}
	f.GoVersion = info.GoVersion
	if f.Version == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		f.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			f.Revision = s.Value
		case "vcs.modified":
			f.Modified = s.Value == "true"
		case "vcs.time":
			f.Time = s.Value
		}
	}
	return f
}

// print writes the facts, one per line; the first is "orangerail VERSION",
// which deploy/build.sh checks after building.
func (f buildFacts) print(w io.Writer) {
	fmt.Fprintf(w, "orangerail %s\n", f.Version)
	fmt.Fprintf(w, "go: %s\n", f.GoVersion)
	if f.Revision == "" {
		fmt.Fprintln(w, "revision: unknown (built without version control information)")
		return
	}
	modified := ""
	if f.Modified {
		modified = " (modified)"
	}
	fmt.Fprintf(w, "revision: %s%s\n", f.Revision, modified)
	if f.Time != "" {
		fmt.Fprintf(w, "committed: %s\n", f.Time)
	}
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print orangerail's version, the Go toolchain and the source revision it was built from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			readBuildFacts().print(cmd.OutOrStdout())
			return nil
		},
	}
}
