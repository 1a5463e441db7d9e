package e2e

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/testserver"
)

// dockerfile is the repository's Dockerfile as instructions (continued
// lines joined), and those of its final stage, the image.
func dockerfile(t *testing.T, root string) (all, image []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	require.NoError(t, err)
	var cur strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if rest, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(rest + " ")
			continue
		}
		cur.WriteString(line)
		all = append(all, cur.String())
		if strings.HasPrefix(strings.ToUpper(cur.String()), "FROM ") {
			image = nil
		}
		image = append(image, cur.String())
		cur.Reset()
	}
	return all, image
}

// TestImageHealthcheck: the image has a HEALTHCHECK whose command is a
// program the image holds — built from the repository, copied into the
// final stage — and that command, run as the image runs it, passes
// against a running server's health endpoint and fails where none
// answers. (No Docker engine runs here: the program is built as the
// Dockerfile builds it.)
func TestImageHealthcheck(t *testing.T) {
	root, err := devstack.RepoRoot()
	require.NoError(t, err)
	all, image := dockerfile(t, root)

	var argv []string
	env := map[string]string{}
	for _, ins := range image {
		word, rest, _ := strings.Cut(ins, " ")
		switch strings.ToUpper(word) {
		case "HEALTHCHECK":
			_, cmd, ok := strings.Cut(rest, "CMD ")
			require.True(t, ok, "HEALTHCHECK runs a command: %s", ins)
			require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(cmd)), &argv), "exec form, since the image has no shell: %s", ins)
			for _, opt := range []string{"--interval=", "--timeout=", "--retries="} {
				require.Contains(t, rest, opt)
			}
		case "ENV":
			k, v, _ := strings.Cut(rest, "=")
			env[k] = v
		}
	}
	require.NotEmpty(t, argv, "the image has a HEALTHCHECK")

	// The program is copied into the image from the build stage, which
	// builds it from a package of this repository.
	dir, name := path.Split(argv[0])
	var built string
	for _, ins := range image {
		if f := strings.Fields(ins); strings.EqualFold(f[0], "COPY") && strings.HasPrefix(f[1], "--from=") && f[len(f)-1] == dir {
			for _, src := range f[2 : len(f)-1] {
				if path.Base(src) == name {
					built = src
				}
			}
		}
	}
	require.NotEmpty(t, built, "%s is copied into the image", argv[0])
	var pkg string
	for _, ins := range all {
		if m := regexp.MustCompile(`go build [^&]*-o ` + regexp.QuoteMeta(built) + ` (\./\S+)`).FindStringSubmatch(ins); m != nil {
			pkg = m[1]
		}
	}
	require.NotEmpty(t, pkg, "the build stage builds %s", built)
	bin := filepath.Join(t.TempDir(), name)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	probe := func(addr string) error {
		cmd := exec.CommandContext(ctx, bin, argv[1:]...)
		cmd.Env = append(os.Environ(), "AGENTFLOW_HTTP_ADDR="+addr)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Logf("%s", out)
		}
		return err
	}
	require.Equal(t, "0.0.0.0:9090", env["AGENTFLOW_HTTP_ADDR"], "the image serves its health where the check probes")
	srv := testserver.Start(t, testserver.Options{Script: testScript, Catalogs: []string{testCatalog}, HTTP: true})
	require.NoError(t, probe(srv.HTTPAddr()), "healthy against a running server")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := l.Addr().String()
	require.NoError(t, l.Close())
	require.Error(t, probe(closed), "unhealthy where no server answers")
}

// TestComposeRestartPolicies: every service of docker-compose.yml (and of
// docker-compose.observability.yml) says how it restarts — those that serve
// unless stopped, so a process that exits (a gateway whose OIDC issuer was
// down at start) comes back, and one-shot jobs on failure — as
// docs/guides/grpc.md's OIDC section relies on.
func TestComposeRestartPolicies(t *testing.T) {
	root, err := devstack.RepoRoot()
	require.NoError(t, err)
	type services map[string]struct {
		Restart string `yaml:"restart"`
		// A list of services, or a map of them to conditions.
		DependsOn any `yaml:"depends_on"`
	}
	read := func(name string) services {
		data, err := os.ReadFile(filepath.Join(root, name))
		require.NoError(t, err)
		var compose struct {
			Services services `yaml:"services"`
		}
		require.NoError(t, yaml.Unmarshal(data, &compose))
		return compose.Services
	}
	var compose struct{ Services services }
	compose.Services = read("docker-compose.yml")
	// The observability file's own services run beside them; the rest of
	// it adds settings to the base file's.
	for name, svc := range read("docker-compose.observability.yml") {
		if _, ok := compose.Services[name]; !ok {
			compose.Services[name] = svc
		}
	}
	oneShot := map[string]bool{}
	for _, svc := range compose.Services {
		deps, _ := svc.DependsOn.(map[string]any)
		for dep, c := range deps {
			if cond, _ := c.(map[string]any); cond["condition"] == "service_completed_successfully" {
				oneShot[dep] = true
			}
		}
	}
	oneShot["catalog"] = true // applies the sample catalog and exits
	require.Contains(t, compose.Services, "catalog")
	for name, svc := range compose.Services {
		want := "unless-stopped"
		if oneShot[name] {
			want = "on-failure"
		}
		require.Equal(t, want, svc.Restart, "service %s", name)
	}
}
