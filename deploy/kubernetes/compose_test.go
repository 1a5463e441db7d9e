package kubernetes

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/agentflow/agentflow/docs"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/devstack"
)

// clusterOnly are the settings the manifests give that docker-compose.yml
// leaves to their defaults, and why.
var clusterOnly = map[string]string{}

// TestInStepWithCompose compares the manifests with docker-compose.yml: the
// same roles, each given at least the settings compose gives it, with the
// same listening ports; every other setting of the manifests one that
// docs/reference/configuration.md documents (or clusterOnly explains);
// secrets only from the Secret, whose keys secret.env.example lists; and
// docs/operations/kubernetes.md's recipe covers what compose's one-shot
// services do.
func TestInStepWithCompose(t *testing.T) {
	h := newHarness(t)
	r := index(decode(t, h.render(t, "base")))

	data, err := os.ReadFile(filepath.Join(h.root, "docker-compose.yml"))
	require.NoError(t, err)
	var compose struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
			Entrypoint  []string          `yaml:"entrypoint"`
			Command     []string          `yaml:"command"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(data, &compose))

	composeRoles := map[string][]string{} // role → services
	composeSettings := map[string]bool{}
	for name, svc := range compose.Services {
		if role := svc.Environment["AGENTFLOW_ROLES"]; role != "" {
			composeRoles[role] = append(composeRoles[role], name)
			for k := range svc.Environment {
				composeSettings[k] = true
			}
		}
	}

	clusterRoles := map[string]map[string]setting{} // role → settings
	for name, o := range r["Deployment"] {
		d := spec[deployment](t, o)
		env := settings(t, d.Template.Spec.Containers[0], r)
		role := env["AGENTFLOW_ROLES"].value
		require.NotContains(t, clusterRoles, role, "%s: one Deployment per role", name)
		clusterRoles[role] = env
	}
	require.ElementsMatch(t, keys(composeRoles), keys(clusterRoles), "the same roles")

	documented := configurationTable(t, h.root)
	for role, services := range composeRoles {
		env := clusterRoles[role]
		for _, svc := range services {
			for k, v := range compose.Services[svc].Environment {
				require.True(t, has(env, k), "%s, set in compose's %s, is set for the %s pods", k, svc, role)
				if strings.HasSuffix(k, "_ADDR") && k != "AGENTFLOW_TEMPORAL_HTTP_ADDR" {
					// A process's own listeners: the same ports, on every interface.
					require.Equal(t, listen(t, v), listen(t, env[k].value), "%s of the %s role", k, role)
				}
			}
		}
		for k, s := range env {
			_, why := clusterOnly[k]
			require.True(t, composeSettings[k] || documented[k] || why, "%s (%s pods) is a setting docs/reference/configuration.md documents", k, role)
			require.Equal(t, contains(secretSettings, k), s.secret != "", "%s of the %s pods: from the Secret exactly when it is a secret", k, role)
		}
	}
	for k := range clusterOnly {
		require.True(t, has(clusterRoles["worker"], k), "clusterOnly names %s, a setting the workers get", k)
	}

	// One policy for every process, as in compose: the same ConfigMap's.
	for _, k := range []string{"AGENTFLOW_EGRESS_ALLOW", "AGENTFLOW_PLATFORM_ADDRS", "AGENTFLOW_SECRETS"} {
		sources := map[string]bool{}
		for role, env := range clusterRoles {
			require.NotEmpty(t, env[k].configMap, "%s of the %s pods comes from the ConfigMap", k, role)
			sources[env[k].configMap] = true
		}
		require.Len(t, sources, 1, k)
	}

	// The Secret the operator creates has the keys the pods read.
	referenced := map[string]bool{}
	for _, env := range clusterRoles {
		for k, s := range env {
			if s.secret == "agentflow" {
				referenced[k] = true
			}
		}
	}
	example := envFile(t, filepath.Join(h.root, "deploy", "kubernetes", "base", "secret.env.example"))
	require.ElementsMatch(t, keys(referenced), keys(example), "secret.env.example lists the Secret's keys")

	// Compose's one-shot services are steps of the docs' recipe: the
	// search attributes (temporal-init) and the catalog (catalog).
	recipe := docSection(t, "operations/kubernetes.md", "Running on Kubernetes")
	for _, sa := range contract.SearchAttributes() {
		require.Contains(t, strings.Join(compose.Services["temporal-init"].Command, " "), sa)
		require.Regexp(t, `search-attribute create [^\n]*--name `+sa+` --type Keyword`, recipe, "the recipe registers %s", sa)
	}
	require.Contains(t, strings.Join(compose.Services["catalog"].Entrypoint, " "), "catalog apply")
	require.Contains(t, recipe, "starter catalog apply")
	// Every kustomization the recipe applies is one the tests render.
	applied := regexp.MustCompile(`kubectl (?:apply|kustomize|diff) -k (\S+)|kubectl kustomize (\S+)`).FindAllStringSubmatch(recipe, -1)
	require.NotEmpty(t, applied)
	for _, m := range applied {
		dir := strings.TrimPrefix(m[1]+m[2], "deploy/kubernetes/")
		rendered := false
		for _, rd := range renders {
			rendered = rendered || rd.dir == dir
		}
		require.True(t, rendered, "the recipe applies %s, which TestManifests renders", m[1]+m[2])
	}
}

// listen is an address's host and port, with an unspecified host written
// as 0.0.0.0.
func listen(t *testing.T, addr string) string {
	t.Helper()
	host, p, err := net.SplitHostPort(addr)
	require.NoError(t, err, "address %q", addr)
	if host == "" || host == "::" {
		host = "0.0.0.0"
	}
	return net.JoinHostPort(host, p)
}

// configurationTable is the variables docs/reference/configuration.md's
// table names, each in backquotes in its first column.
func configurationTable(t *testing.T, root string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	name := regexp.MustCompile("`([A-Z][A-Z0-9_]+)`")
	for _, line := range strings.Split(docSection(t, "reference/configuration.md", "Configuration"), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
		for _, m := range name.FindAllStringSubmatch(first, -1) {
			names[m[1]] = true
		}
	}
	require.Contains(t, names, "DATABASE_URL", "docs/reference/configuration.md's table")
	return names
}

// docSection is what the docs page at name says under the heading title.
func docSection(t *testing.T, name, title string) string {
	t.Helper()
	section, err := docs.Section(name, title)
	require.NoError(t, err)
	return section
}

// envFile reads KEY=value lines, skipping comments.
func envFile(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		require.True(t, ok, "%s: %q", path, line)
		env[k] = v
	}
	require.NoError(t, sc.Err())
	return env
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestComposeObjectStore: docker-compose.yml runs an S3-compatible store
// of a pinned release, on a volume, with a healthcheck; a one-shot
// service creates the bucket once it is healthy; and every agentflow
// process waits for that and is given the same store: its endpoint, the
// bucket created, path style, and MinIO's own credential, which comes from
// the environment (a reference with a laptop's default), never a literal.
func TestComposeObjectStore(t *testing.T) {
	root, err := devstack.RepoRoot()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	require.NoError(t, err)
	type service struct {
		Image       string            `yaml:"image"`
		Restart     string            `yaml:"restart"`
		Environment map[string]string `yaml:"environment"`
		Entrypoint  []string          `yaml:"entrypoint"`
		Volumes     []string          `yaml:"volumes"`
		Healthcheck struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
		// A list of services, or a map of them to conditions.
		DependsOn any `yaml:"depends_on"`
	}
	// condition is what svc waits for of dep.
	condition := func(svc service, dep string) string {
		deps, _ := svc.DependsOn.(map[string]any)
		c, _ := deps[dep].(map[string]any)
		s, _ := c["condition"].(string)
		return s
	}
	var compose struct {
		Services map[string]service `yaml:"services"`
		Volumes  map[string]any     `yaml:"volumes"`
	}
	require.NoError(t, yaml.Unmarshal(data, &compose))
	pinned := regexp.MustCompile(`:RELEASE\.\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}Z$`)

	store, ok := compose.Services["minio"]
	require.True(t, ok, "a minio service")
	require.Regexp(t, `^minio/minio`+pinned.String(), store.Image, "a pinned release")
	require.Equal(t, "unless-stopped", store.Restart)
	require.Equal(t, []string{"minio:/data"}, store.Volumes)
	require.Contains(t, compose.Volumes, "minio")
	require.NotEmpty(t, store.Healthcheck.Test)

	creator, ok := compose.Services["minio-init"]
	require.True(t, ok, "a service that creates the bucket")
	require.Regexp(t, `^minio/mc`+pinned.String(), creator.Image, "a pinned release")
	require.Equal(t, "service_healthy", condition(creator, "minio"))
	require.Equal(t, []string{"mc", "mb", "--ignore-existing"}, creator.Entrypoint[:3])
	alias, bucket, ok := strings.Cut(creator.Entrypoint[3], "/")
	require.True(t, ok, "mc mb ALIAS/BUCKET: %v", creator.Entrypoint)

	user, secret := store.Environment["MINIO_ROOT_USER"], store.Environment["MINIO_ROOT_PASSWORD"]
	for _, v := range []string{user, secret} {
		require.Regexp(t, `^\$\{[A-Z0-9_]+(:-[^}]*)?\}$`, v, "the credential comes from the environment")
	}
	require.Equal(t, "http://"+user+":"+secret+"@minio:9000", creator.Environment["MC_HOST_"+alias], "the bucket's creator signs in as MinIO's root")

	want := map[string]string{
		"AGENTFLOW_S3_ENDPOINT": "http://minio:9000", "AGENTFLOW_S3_BUCKET": bucket, "AGENTFLOW_S3_PATH_STYLE": "true",
		"AGENTFLOW_S3_ACCESS_KEY_ID": user, "AGENTFLOW_S3_SECRET_ACCESS_KEY": secret,
	}
	processes := 0
	for name, svc := range compose.Services {
		if svc.Environment["AGENTFLOW_ROLES"] == "" {
			continue
		}
		processes++
		got := map[string]string{}
		for k, v := range svc.Environment {
			if strings.HasPrefix(k, "AGENTFLOW_S3_") {
				got[k] = v
			}
		}
		require.Equal(t, want, got, "the object store of %s", name)
		require.Equal(t, "service_completed_successfully", condition(svc, "minio-init"), "%s starts once the bucket exists", name)
	}
	require.Equal(t, 3, processes, "two workers and a gateway")
}
