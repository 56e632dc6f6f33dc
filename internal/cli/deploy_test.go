package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/orangerail/orangerail/internal/app"
	"github.com/orangerail/orangerail/internal/ontology"
)

// The deployment files, from this package's directory.
const (
	kubernetesDir = "../../deploy/kubernetes"
	composeFile   = "../../docker-compose.yml"
	dockerfile    = "../../Dockerfile"
	readmeFile    = "../../README.md"
)

// checkCommandLine parses args with the real command tree as Run would,
// without running the command: an unknown command or flag, a missing or
// extra argument, or a flag group broken is an error.
func checkCommandLine(args []string) error {
	root := newRootCmd()
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	if cmd == root || !cmd.Runnable() || cmd.HasSubCommands() { // a group runs only to refuse a word or print help
		return fmt.Errorf("%q names no command that runs", strings.Join(args, " "))
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return err
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		return err
	}
	if err := cmd.ValidateRequiredFlags(); err != nil {
		return err
	}
	return cmd.ValidateFlagGroups()
}

// TestCheckCommandLine: the checker the deployment tests rely on refuses
// what Run would refuse.
func TestCheckCommandLine(t *testing.T) {
	t.Parallel()
	for _, ok := range [][]string{{"serve", "--config", "x.yaml"}, {"migrate", "up"}, {"migrate", "--database-url", "u", "status"},
		{"demo", "--listen", "0.0.0.0:8080", "--public-url", "http://localhost:8080"}, {"audit", "verify", "--tenant", "acme"}, {"version"}} {
		if err := checkCommandLine(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range [][]string{{}, {"migrate"}, {"serve", "--listen", "0.0.0.0:8080"}, {"migrate", "sideways"}, {"audit", "verify", "acme"},
		{"serve", "--stdio", "--token-env", "T", "--dev-tenant", "x"}, {"config", "check"}} {
		if err := checkCommandLine(bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}

// manifest is what the tests read of a Kubernetes object.
type manifest struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Resources []string          `yaml:"resources"` // a Kustomization's
	Data      map[string]string `yaml:"data"`      // a ConfigMap's
	Spec      struct {
		Template struct {
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type podSpec struct {
	TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot *bool `yaml:"runAsNonRoot"`
		RunAsUser    int   `yaml:"runAsUser"`
	} `yaml:"securityContext"`
	Containers []struct {
		Name  string   `yaml:"name"`
		Image string   `yaml:"image"`
		Args  []string `yaml:"args"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		Env []struct {
			Name      string `yaml:"name"`
			ValueFrom struct {
				SecretKeyRef *struct {
					Name string `yaml:"name"`
					Key  string `yaml:"key"`
				} `yaml:"secretKeyRef"`
			} `yaml:"valueFrom"`
		} `yaml:"env"`
		ReadinessProbe *probe `yaml:"readinessProbe"`
		LivenessProbe  *probe `yaml:"livenessProbe"`
		Lifecycle      struct {
			PreStop struct {
				Sleep struct {
					Seconds int `yaml:"seconds"`
				} `yaml:"sleep"`
			} `yaml:"preStop"`
		} `yaml:"lifecycle"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
		SecurityContext struct {
			ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
			AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		} `yaml:"securityContext"`
	} `yaml:"containers"`
	Volumes []struct {
		Name      string `yaml:"name"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
	} `yaml:"volumes"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

// readManifests decodes every document of every YAML file in dir, by file
// name; a file that does not parse, or a document without apiVersion and
// kind, fails the test.
func readManifests(t *testing.T, dir string) map[string][]manifest {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s (%v)", dir, err)
	}
	all := map[string][]manifest{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var node yaml.Node
			if err := dec.Decode(&node); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var m manifest
			if err := node.Decode(&m); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if m.APIVersion == "" || m.Kind == "" {
				t.Fatalf("%s: a document without apiVersion and kind", f)
			}
			all[filepath.Base(f)] = append(all[filepath.Base(f)], m)
		}
	}
	return all
}

// byKind returns the one object of kind among the manifests.
func byKind(t *testing.T, all map[string][]manifest, kind string) manifest {
	t.Helper()
	var found []manifest
	for _, ms := range all {
		for _, m := range ms {
			if m.Kind == kind {
				found = append(found, m)
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d objects of kind %s, want 1", len(found), kind)
	}
	return found[0]
}

// TestKubernetesManifests: deploy/kubernetes parses; the kustomization
// lists every file; the server and the migration run command lines the
// real command tree takes; the server reads the key and the database URL
// from the Secret under the names the binary reads, and the ontology from
// the ConfigMap at the path --config names, which loads; the probes and
// the config's listen use the container's port; both pods run as the
// image's non-root user on a read-only root. The probes' paths are
// checked against the routes in internal/app (TestDeployProbesAreServed).
func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	all := readManifests(t, kubernetesDir)

	kustomization := byKind(t, all, "Kustomization")
	var others []string
	for f := range all {
		if f != "kustomization.yaml" {
			others = append(others, f)
		}
	}
	if slices.Sort(others); !slices.Equal(slices.Sorted(slices.Values(kustomization.Resources)), others) {
		t.Fatalf("kustomization.yaml lists %v, the directory holds %v", kustomization.Resources, others)
	}
	for _, kind := range []string{"Service", "PodDisruptionBudget"} {
		byKind(t, all, kind)
	}

	config := byKind(t, all, "ConfigMap")
	for _, kind := range []string{"Deployment", "Job"} {
		pod := byKind(t, all, kind).Spec.Template.Spec
		if sc := pod.SecurityContext; sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser != nonrootUID(t) {
			t.Errorf("%s: runAsNonRoot %v, runAsUser %d; want runAsNonRoot true and the image's user %d", kind, sc.RunAsNonRoot != nil && *sc.RunAsNonRoot, sc.RunAsUser, nonrootUID(t))
		}
		if len(pod.Containers) != 1 {
			t.Fatalf("%s: %d containers, want 1", kind, len(pod.Containers))
		}
		c := pod.Containers[0]
		if c.Image != "orangerail" {
			t.Errorf("%s: image %q, want orangerail (the kustomization's images entry names it)", kind, c.Image)
		}
		if sc := c.SecurityContext; !sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: the container's root is not read-only, or it may escalate privileges", kind)
		}
		if err := checkCommandLine(c.Args); err != nil {
			t.Errorf("%s: args %q: %v", kind, c.Args, err)
		}
		env := map[string]string{}
		for _, e := range c.Env {
			if ref := e.ValueFrom.SecretKeyRef; ref != nil && ref.Name == "orangerail" {
				env[e.Name] = ref.Key
			}
		}
		want := map[string]string{"DATABASE_URL": "migrate-database-url"}
		if kind == "Deployment" {
			want = map[string]string{"DATABASE_URL": "database-url", app.SecretKeyEnv: "secret-key"}
		}
		if !maps.Equal(env, want) {
			t.Errorf("%s: from the Secret %v, want %v", kind, env, want)
		}
		if kind != "Deployment" {
			continue
		}

		if c.Args[0] != "serve" {
			t.Fatalf("the Deployment runs %q, want serve", c.Args)
		}
		configPath := c.Args[slices.Index(c.Args, "--config")+1]
		mount := ""
		for _, m := range c.VolumeMounts {
			for _, v := range pod.Volumes {
				if v.Name == m.Name && v.ConfigMap != nil && v.ConfigMap.Name == config.Metadata.Name {
					mount = m.MountPath
				}
			}
		}
		text, ok := config.Data[strings.TrimPrefix(configPath, mount+"/")]
		if mount == "" || path.Dir(configPath) != mount || !ok {
			t.Fatalf("--config %s is not a key of the ConfigMap %s mounted at %q", configPath, config.Metadata.Name, mount)
		}
		cfg, err := ontology.Parse([]byte(text))
		if err != nil {
			t.Fatalf("the ConfigMap's ontology: %v", err)
		}
		if cfg.Identity.OIDC == nil {
			t.Error("the ConfigMap's ontology has no identity.oidc: serve refuses to serve HTTP without it")
		}
		// The container's ports are the config's listeners, each by name:
		// the HTTP front, and the metrics.
		if len(c.Ports) != 2 || c.Ports[0].Name != "http" || c.Ports[1].Name != "metrics" {
			t.Fatalf("ports %+v, want http and metrics", c.Ports)
		}
		for i, listen := range []string{cfg.HTTP.Listen, cfg.Metrics.Listen} {
			if _, port, _ := net.SplitHostPort(listen); port != fmt.Sprint(c.Ports[i].ContainerPort) {
				t.Errorf("the config listens on %q, the container's %s port is %d", listen, c.Ports[i].Name, c.Ports[i].ContainerPort)
			}
		}
		// The pod is given the time to drain after its preStop sleep:
		// killed sooner, an execution in flight is left outcome_unknown.
		if need := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds)*time.Second + app.DrainTimeout(cfg.Limits); time.Duration(pod.TerminationGracePeriodSeconds)*time.Second < need {
			t.Errorf("terminationGracePeriodSeconds %d is shorter than the preStop sleep and serve's drain (%s)", pod.TerminationGracePeriodSeconds, need)
		}
		for name, p := range map[string]*probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
			if p == nil || p.HTTPGet.Port != "http" {
				t.Errorf("the %s probe is missing or not on port http", name)
			}
		}
	}
}

// nonrootUID is the user the Dockerfile's image runs as, by number (a
// name Kubernetes cannot check against runAsNonRoot); never root.
func nonrootUID(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	users := regexp.MustCompile(`(?m)^USER ([0-9]+):[0-9]+$`).FindAllSubmatch(b, -1)
	if len(users) != 1 {
		t.Fatal("the Dockerfile does not run as one numeric USER uid:gid")
	}
	uid, err := strconv.Atoi(string(users[0][1]))
	if err != nil || uid == 0 {
		t.Fatalf("the Dockerfile runs as uid %s", users[0][1])
	}
	return uid
}

// TestImageBuildIsOneScript: the Dockerfile and `make image-binary` (which
// `make test` runs first) build the binary by the one script holding the
// flags, deploy/build.sh, and neither runs a go build of its own; the
// image's entrypoint is the binary the script wrote.
func TestImageBuildIsOneScript(t *testing.T) {
	t.Parallel()
	read := func(name string) string {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	docker, makefile := read(dockerfile), read("../../Makefile")
	built := regexp.MustCompile(`(?m)^RUN .*deploy/build\.sh (\S+)$`).FindStringSubmatch(docker)
	if built == nil || strings.Contains(docker, "go build") {
		t.Fatal("the Dockerfile does not build with deploy/build.sh alone")
	}
	if !strings.Contains(docker, "\nCOPY --from=build "+built[1]+" /orangerail\n") || !strings.Contains(docker, "\nENTRYPOINT [\"/orangerail\"]\n") {
		t.Errorf("the image's entrypoint is not the binary deploy/build.sh wrote (%s)", built[1])
	}
	target := regexp.MustCompile(`(?m)^image-binary:\n\t(.*)$`).FindStringSubmatch(makefile)
	if target == nil || !strings.Contains(target[1], "deploy/build.sh ") {
		t.Error("make image-binary does not run deploy/build.sh")
	}
	if test := regexp.MustCompile(`(?m)^test:(.*)$`).FindStringSubmatch(makefile); test == nil || !slices.Contains(strings.Fields(test[1]), "image-binary") {
		t.Error("make test does not run image-binary")
	}
	script := read("../../deploy/build.sh")
	for _, flag := range []string{"CGO_ENABLED=1", "-trimpath", "-tags netgo,osusergo", "-extldflags -static", "cli.version=$version"} {
		if !strings.Contains(script, flag) {
			t.Errorf("deploy/build.sh does not build with %s", flag)
		}
	}
}

// composeService is what the test reads of a docker-compose.yml service.
type composeService struct {
	Profiles    []string          `yaml:"profiles"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	ReadOnly        bool   `yaml:"read_only"`
	StopGracePeriod string `yaml:"stop_grace_period"`
}

// TestComposeFile: every orangerail service of docker-compose.yml runs a
// command line the real command tree takes, and so does every `docker
// compose run` its comments print; the demo listens off loopback with its
// public URL; the production server reads its key and config from the
// environment, on a read-only root, after the migration one-shot
// completed.
func TestComposeFile(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]composeService `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &compose); err != nil {
		t.Fatal(err)
	}
	for name, s := range compose.Services {
		if name == "postgres" {
			continue
		}
		if err := checkCommandLine(s.Command); err != nil {
			t.Errorf("service %s: command %q: %v", name, s.Command, err)
		}
	}
	demo := compose.Services["demo"]
	if !slices.Equal(demo.Profiles, []string{"demo"}) || demo.Command[0] != "demo" {
		t.Fatalf("the demo service: profiles %v, command %q", demo.Profiles, demo.Command)
	}
	listen := demo.Command[slices.Index(demo.Command, "--listen")+1]
	if _, loopback := ontology.LoopbackURL(listen); loopback || !slices.Contains(demo.Command, "--public-url") {
		t.Errorf("the demo listens on %s: the container's loopback is not reachable through a port mapping, and off loopback it needs --public-url", listen)
	}

	server, migrate := compose.Services["orangerail"], compose.Services["migrate"]
	if server.Command[0] != "serve" || !slices.Equal(migrate.Command, []string{"migrate", "up"}) {
		t.Fatalf("orangerail runs %q and migrate %q", server.Command, migrate.Command)
	}
	// docker stop waits 10s by default, then kills: serve's drain needs
	// longer, or an execution in flight is left outcome_unknown.
	if grace, err := time.ParseDuration(server.StopGracePeriod); err != nil || grace < app.DrainTimeout(ontology.Limits{}) {
		t.Errorf("orangerail's stop_grace_period %q is shorter than serve's drain under the default limits (%s)", server.StopGracePeriod, app.DrainTimeout(ontology.Limits{}))
	}
	if server.DependsOn["migrate"].Condition != "service_completed_successfully" {
		t.Errorf("orangerail depends on migrate %+v, want service_completed_successfully", server.DependsOn["migrate"])
	}
	// The key and the issuer come from the environment (the config names
	// identity.oidc.issuer_env: OIDC_ISSUER).
	for _, env := range []string{app.SecretKeyEnv, "DATABASE_URL", "ORANGERAIL_CONFIG", "OIDC_ISSUER"} {
		if _, ok := server.Environment[env]; !ok {
			t.Errorf("orangerail does not set %s", env)
		}
	}
	if !server.ReadOnly {
		t.Error("orangerail's root is not read-only")
	}

	runs := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "#"))
		rest, ok := strings.CutPrefix(line, "docker compose run --rm ")
		if !ok {
			continue
		}
		runs++
		words := strings.Fields(rest)
		if _, ok := compose.Services[words[0]]; !ok {
			t.Errorf("%q runs the service %s, which the file does not define", line, words[0])
		} else if err := checkCommandLine(words[1:]); err != nil {
			t.Errorf("%q: %v", line, err)
		}
	}
	if runs == 0 {
		t.Error("the comments print no docker compose run")
	}
}

// TestReadmeProductionCommands: every orangerail command line printed in
// the README's "Running in production" section is one the real command
// tree takes.
func TestReadmeProductionCommands(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(readmeFile)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Running in production\n")
	if !ok {
		t.Fatal("the README has no Running in production section")
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	commands := 0
	inBlock := false
	for line := range strings.Lines(section) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "```") {
			inBlock = !inBlock
			continue
		}
		if !inBlock {
			continue
		}
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		words := strings.Fields(line)
		for len(words) > 0 && regexp.MustCompile(`^[A-Z_]+=`).MatchString(words[0]) {
			words = words[1:] // VAR=value before the command
		}
		if len(words) == 0 || words[0] != "orangerail" {
			continue
		}
		commands++
		if err := checkCommandLine(words[1:]); err != nil {
			t.Errorf("%q: %v", line, err)
		}
	}
	if commands == 0 {
		t.Fatal("the section prints no orangerail command")
	}
}
