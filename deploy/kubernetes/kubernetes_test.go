package kubernetes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/devstack"
)

// Kinds the Kubernetes API does not have, which the cluster gets from an
// operator's CRDs: kubeconform skips them, and checkObjects checks what
// they refer to.
var crdKinds = []string{"ScaledObject", "ServiceMonitor"}

// The kustomizations the tests render: what users apply, and the base with
// each component, so every file under deploy/kubernetes is rendered.
var renders = []struct {
	name       string
	dir        string   // a kustomization of the repository
	components []string // or the base with these components
}{
	{name: "base", dir: "base"},
	{name: "example", dir: "overlays/example"},
	{name: "keda", components: []string{"keda"}},
	{name: "prometheus", components: []string{"prometheus-adapter", "prometheus-operator"}},
	{name: "temporal-mtls", components: []string{"temporal-mtls"}},
	{name: "k8s-jobs", components: []string{"k8s-jobs"}},
	{name: "nexus-endpoints", components: []string{"nexus-endpoints"}},
}

// TestManifests renders each kustomization and checks it twice: against
// the Kubernetes API's schemas (kubeconform, strict), and for what the
// schemas cannot say — probes on the admin port, resources, a disruption
// budget per Deployment, a grace period that outlasts the stop timeout,
// Services and autoscalers that point at what exists.
func TestManifests(t *testing.T) {
	h := newHarness(t)
	for _, r := range renders {
		t.Run(r.name, func(t *testing.T) {
			out := h.render(t, r.dir, r.components...)
			results := h.validate(t, out)
			objs := decode(t, out)
			require.Len(t, results, len(objs), "kubeconform read every object")
			for _, res := range results {
				if contains(crdKinds, res.Kind) {
					require.Equal(t, "statusSkipped", res.Status, "%s %s", res.Kind, res.Name)
					continue
				}
				require.Equal(t, "statusValid", res.Status, "%s %s: %s", res.Kind, res.Name, res.Msg)
			}
			checkObjects(t, objs)
		})
	}
}

// TestValidationRejects: the check is no formality. Each mistake below,
// made in the rendered base, is refused with a message that names it.
func TestValidationRejects(t *testing.T) {
	h := newHarness(t)
	base := string(h.render(t, "base"))
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"a misspelled field", "  replicas: 2\n", "  replica: 2\n", "additional properties 'replica' not allowed"},
		{"a port as a string", "containerPort: 9090", `containerPort: "9090"`, "got string, want integer"},
		{"a field at the wrong level", "      automountServiceAccountToken: false\n", "      automountServiceAccountToken: false\n      image: agentflow\n", "additional properties 'image' not allowed"},
		{"a required field missing", "  - name: grpc\n    port: 50051\n", "  - name: grpc\n", "missing property 'port'"},
		{"an API version the cluster does not serve", "apiVersion: policy/v1\n", "apiVersion: policy/v1beta1\n", "could not find schema for PodDisruptionBudget"},
		{"a wrong kind for the version", "apiVersion: policy/v1\nkind: PodDisruptionBudget\n", "apiVersion: apps/v1\nkind: PodDisruptionBudget\n", "could not find schema for PodDisruptionBudget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Contains(t, base, tc.old)
			results := h.validate(t, []byte(strings.Replace(base, tc.old, tc.new, 1)))
			var msgs []string
			for _, r := range results {
				if r.Status != "statusValid" {
					msgs = append(msgs, r.Kind+" "+r.Name+": "+r.Msg)
				}
			}
			require.Len(t, msgs, 1, "one object refused")
			require.Contains(t, msgs[0], tc.want)
		})
	}
}

// harness renders and validates with the pinned tools.
type harness struct {
	root, kustomize, kubeconform, schemas string
	api                                   *kubeAPI
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	root, err := devstack.RepoRoot()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	h := &harness{root: root, schemas: t.TempDir()}
	h.kustomize, err = devstack.Tool(ctx, root, "tools/k8s", "kustomize", "sigs.k8s.io/kustomize/kustomize/v5")
	require.NoError(t, err)
	h.kubeconform, err = devstack.Tool(ctx, root, "tools/k8s", "kubeconform", "github.com/yannh/kubeconform/cmd/kubeconform")
	require.NoError(t, err)
	h.api = loadKubeAPI(t, root)
	return h
}

// render builds deploy/kubernetes/<dir>, or the base with components when
// dir is empty.
func (h *harness) render(t *testing.T, dir string, components ...string) []byte {
	t.Helper()
	deploy := filepath.Join(h.root, "deploy", "kubernetes")
	path := filepath.Join(deploy, dir)
	if dir == "" {
		// kustomize takes only relative paths to other kustomizations.
		path = t.TempDir()
		rel := func(p string) string {
			r, err := filepath.Rel(path, filepath.Join(deploy, p))
			require.NoError(t, err)
			return r
		}
		k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + rel("base") + "\ncomponents:\n"
		for _, c := range components {
			k += "  - " + rel(filepath.Join("components", c)) + "\n"
		}
		require.NoError(t, os.WriteFile(filepath.Join(path, "kustomization.yaml"), []byte(k), 0o644))
	}
	cmd := exec.Command(h.kustomize, "build", path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "kustomize build %s: %s", path, stderr.String())
	return out
}

// result is kubeconform's verdict on one object.
type result struct {
	Kind, Name, Status, Msg string
}

// validate runs kubeconform on rendered manifests, with schemas for the
// kinds they use.
func (h *harness) validate(t *testing.T, manifests []byte) []result {
	t.Helper()
	var types []string
	for _, o := range decode(t, manifests) {
		types = append(types, o.APIVersion+" "+o.Kind)
	}
	require.NoError(t, h.api.writeSchemas(h.schemas, types))
	cmd := exec.Command(h.kubeconform, "-strict", "-summary", "-verbose", "-output", "json",
		"-schema-location", schemaTemplate(h.schemas), "-skip", strings.Join(crdKinds, ","), "-")
	cmd.Stdin = bytes.NewReader(manifests)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		require.NoError(t, err, "kubeconform: %s", stderr.String())
	}
	var report struct {
		Resources []result `json:"resources"`
	}
	require.NoError(t, json.Unmarshal(out, &report), "kubeconform's report: %s%s", out, stderr.String())
	return report.Resources
}

// object is a rendered Kubernetes object, with the parts the checks read.
type object struct {
	APIVersion string            `yaml:"apiVersion"`
	Kind       string            `yaml:"kind"`
	Metadata   meta              `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	Spec       yaml.Node         `yaml:"spec"`
}

type meta struct {
	Name        string            `yaml:"name"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type deployment struct {
	Replicas *int     `yaml:"replicas"`
	Selector selector `yaml:"selector"`
	Template struct {
		Metadata meta `yaml:"metadata"`
		Spec     struct {
			TerminationGracePeriodSeconds *int        `yaml:"terminationGracePeriodSeconds"`
			Containers                    []container `yaml:"containers"`
		} `yaml:"spec"`
	} `yaml:"template"`
}

type selector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Env     []envVar `yaml:"env"`
	EnvFrom []struct {
		ConfigMapRef *ref `yaml:"configMapRef"`
		SecretRef    *ref `yaml:"secretRef"`
	} `yaml:"envFrom"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	StartupProbe   *probe `yaml:"startupProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
}

type envVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		SecretKeyRef *struct {
			Name     string `yaml:"name"`
			Key      string `yaml:"key"`
			Optional bool   `yaml:"optional"`
		} `yaml:"secretKeyRef"`
	} `yaml:"valueFrom"`
}

type ref struct {
	Name     string `yaml:"name"`
	Optional bool   `yaml:"optional"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

type service struct {
	Selector map[string]string `yaml:"selector"`
	Ports    []struct {
		Name       string `yaml:"name"`
		Port       int    `yaml:"port"`
		TargetPort string `yaml:"targetPort"`
	} `yaml:"ports"`
}

type pdb struct {
	Selector       selector `yaml:"selector"`
	MaxUnavailable *int     `yaml:"maxUnavailable"`
	MinAvailable   *int     `yaml:"minAvailable"`
}

type scaleTarget struct {
	Kind                   string `yaml:"kind"`
	Name                   string `yaml:"name"`
	EnvSourceContainerName string `yaml:"envSourceContainerName"`
}

type scaledObject struct {
	ScaleTargetRef  scaleTarget `yaml:"scaleTargetRef"`
	MinReplicaCount int         `yaml:"minReplicaCount"`
	MaxReplicaCount int         `yaml:"maxReplicaCount"`
	Triggers        []struct {
		Type     string            `yaml:"type"`
		Metadata map[string]string `yaml:"metadata"`
	} `yaml:"triggers"`
}

type hpa struct {
	ScaleTargetRef scaleTarget `yaml:"scaleTargetRef"`
	MinReplicas    int         `yaml:"minReplicas"`
	Metrics        []struct {
		Type     string `yaml:"type"`
		External *struct {
			Metric struct {
				Name     string   `yaml:"name"`
				Selector selector `yaml:"selector"`
			} `yaml:"metric"`
		} `yaml:"external"`
		Pods *struct {
			Metric struct {
				Name string `yaml:"name"`
			} `yaml:"metric"`
		} `yaml:"pods"`
	} `yaml:"metrics"`
}

type serviceMonitor struct {
	Selector  selector `yaml:"selector"`
	Endpoints []struct {
		Port string `yaml:"port"`
		Path string `yaml:"path"`
	} `yaml:"endpoints"`
}

// decode reads a stream of YAML documents.
func decode(t *testing.T, data []byte) []object {
	t.Helper()
	var objs []object
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var o object
		err := dec.Decode(&o)
		if err == io.EOF {
			return objs
		}
		require.NoError(t, err)
		objs = append(objs, o)
	}
}

func spec[T any](t *testing.T, o object) T {
	t.Helper()
	var v T
	require.NoError(t, o.Spec.Decode(&v), "%s %s", o.Kind, o.Metadata.Name)
	return v
}

// rendered is a render's objects by kind and name.
type rendered map[string]map[string]object

func index(objs []object) rendered {
	r := rendered{}
	for _, o := range objs {
		if r[o.Kind] == nil {
			r[o.Kind] = map[string]object{}
		}
		r[o.Kind][o.Metadata.Name] = o
	}
	return r
}

// margin is how much longer than the stop timeout Kubernetes waits before
// it kills a process: time to close connections, flush and exit.
const margin = 10 * time.Second

// The settings that hold secrets: always from a Secret, never a ConfigMap.
var secretSettings = []string{"DATABASE_URL", "AGENTFLOW_TOKENS", "TEMPORAL_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AGENTFLOW_VAULT_KEY",
	"AGENTFLOW_S3_ACCESS_KEY_ID", "AGENTFLOW_S3_SECRET_ACCESS_KEY"}

// checkObjects checks a render for what the schemas do not say.
func checkObjects(t *testing.T, objs []object) {
	r := index(objs)
	deployments := r["Deployment"]
	require.Len(t, deployments, 2, "a Deployment per role")
	for name, o := range deployments {
		d := spec[deployment](t, o)
		require.Len(t, d.Template.Spec.Containers, 1, name)
		c := d.Template.Spec.Containers[0]
		env := settings(t, c, r)
		require.True(t, labelsMatch(d.Selector.MatchLabels, d.Template.Metadata.Labels), "%s selects its pods", name)

		admin := port(t, env["AGENTFLOW_HTTP_ADDR"].value)
		require.Equal(t, admin, containerPort(t, c, "admin"), "%s: the admin port is AGENTFLOW_HTTP_ADDR's", name)
		require.NotNil(t, c.StartupProbe, name)
		require.NotNil(t, c.LivenessProbe, name)
		require.NotNil(t, c.ReadinessProbe, name)
		for _, p := range []*probe{c.StartupProbe, c.LivenessProbe} {
			require.Equal(t, "/livez", p.HTTPGet.Path, name)
			require.Equal(t, "admin", p.HTTPGet.Port, name)
		}
		require.Equal(t, "/healthz", c.ReadinessProbe.HTTPGet.Path, name)
		require.Equal(t, "admin", c.ReadinessProbe.HTTPGet.Port, name)

		ann := d.Template.Metadata.Annotations
		require.Equal(t, "true", ann["prometheus.io/scrape"], name)
		require.Equal(t, strconv.Itoa(admin), ann["prometheus.io/port"], name)
		require.Equal(t, "/metrics", ann["prometheus.io/path"], name)

		for _, res := range []string{"cpu", "memory"} {
			require.NotEmpty(t, c.Resources.Requests[res], "%s requests %s", name, res)
			require.NotEmpty(t, c.Resources.Limits[res], "%s limits %s", name, res)
		}

		stop, err := time.ParseDuration(env["AGENTFLOW_STOP_TIMEOUT"].value)
		require.NoError(t, err, "%s: AGENTFLOW_STOP_TIMEOUT", name)
		require.NotNil(t, d.Template.Spec.TerminationGracePeriodSeconds, name)
		grace := time.Duration(*d.Template.Spec.TerminationGracePeriodSeconds) * time.Second
		require.GreaterOrEqual(t, grace, stop+margin, "%s: terminationGracePeriodSeconds outlasts the stop timeout", name)

		for _, s := range secretSettings {
			if v, ok := env[s]; ok {
				require.Equal(t, "agentflow", v.secret, "%s: %s comes from the Secret agentflow", name, s)
			}
		}
		require.True(t, has(env, "DATABASE_URL"), name)
		require.False(t, env["DATABASE_URL"].optional, "%s: DATABASE_URL is required", name)

		budgets := 0
		for _, p := range r["PodDisruptionBudget"] {
			b := spec[pdb](t, p)
			if labelsMatch(b.Selector.MatchLabels, d.Template.Metadata.Labels) {
				budgets++
				require.True(t, b.MaxUnavailable != nil || b.MinAvailable != nil, p.Metadata.Name)
			}
		}
		require.Equal(t, 1, budgets, "%s: one PodDisruptionBudget", name)
	}

	gateway := spec[deployment](t, deployments["agentflow-gateway"])
	gw := gateway.Template.Spec.Containers[0]
	gwEnv := settings(t, gw, r)
	require.Equal(t, "gateway", gwEnv["AGENTFLOW_ROLES"].value)
	svc := spec[service](t, r["Service"]["agentflow-gateway"])
	require.True(t, labelsMatch(svc.Selector, gateway.Template.Metadata.Labels), "the gateway Service selects the gateways")
	ports := map[string]int{}
	for _, p := range svc.Ports {
		require.Equal(t, p.Port, containerPort(t, gw, p.TargetPort), "Service port %s", p.Name)
		ports[p.Name] = p.Port
	}
	require.Equal(t, map[string]int{
		"grpc": port(t, gwEnv["AGENTFLOW_GRPC_ADDR"].value),
		"http": port(t, gwEnv["AGENTFLOW_HTTP_API_ADDR"].value),
	}, ports, "the gateway Service serves the gRPC and HTTP APIs, and not the admin port")
	require.True(t, has(gwEnv, "AGENTFLOW_TOKENS"))
	require.False(t, gwEnv["AGENTFLOW_TOKENS"].optional, "a gateway needs its tokens")

	admin := r["Service"]["agentflow-admin"]
	adminSvc := spec[service](t, admin)
	for name, o := range deployments {
		d := spec[deployment](t, o)
		require.True(t, labelsMatch(adminSvc.Selector, d.Template.Metadata.Labels), "agentflow-admin selects %s", name)
	}
	require.Len(t, adminSvc.Ports, 1)
	require.Equal(t, "admin", adminSvc.Ports[0].TargetPort)

	worker := spec[deployment](t, deployments["agentflow-worker"])
	wk := worker.Template.Spec.Containers[0]
	wkEnv := settings(t, wk, r)
	require.Equal(t, "worker", wkEnv["AGENTFLOW_ROLES"].value)
	if tag := imageTag(wk.Image); tag != "" {
		require.Equal(t, tag, wkEnv["AGENTFLOW_BUILD_ID"].value, "a worker's build id is its image's tag")
	}

	autoscalers := 0
	for _, o := range r["ScaledObject"] {
		autoscalers++
		so := spec[scaledObject](t, o)
		require.Equal(t, "agentflow-worker", so.ScaleTargetRef.Name)
		require.Equal(t, wk.Name, so.ScaleTargetRef.EnvSourceContainerName)
		require.GreaterOrEqual(t, so.MinReplicaCount, 2, "two workers at least, so one can be drained")
		require.Greater(t, so.MaxReplicaCount, so.MinReplicaCount)
		var temporal bool
		for _, tr := range so.Triggers {
			if tr.Type != "temporal" {
				continue
			}
			temporal = true
			queue := contract.TaskQueue
			if q, ok := wkEnv["AGENTFLOW_TASK_QUEUE"]; ok {
				queue = q.value
			}
			require.Equal(t, queue, tr.Metadata["taskQueue"], "the scaler watches the workers' task queue")
			for k, v := range tr.Metadata {
				if strings.HasSuffix(k, "FromEnv") {
					require.True(t, has(wkEnv, v), "trigger parameter %s reads the worker's %s", k, v)
				}
			}
			require.Equal(t, "TEMPORAL_ADDRESS", tr.Metadata["endpointFromEnv"], "the scaler asks the workers' frontend")
		}
		require.True(t, temporal, "a trigger on the task queue's backlog")
	}
	for _, o := range r["HorizontalPodAutoscaler"] {
		autoscalers++
		h := spec[hpa](t, o)
		require.Equal(t, scaleTarget{Kind: "Deployment", Name: "agentflow-worker"}, scaleTarget{Kind: h.ScaleTargetRef.Kind, Name: h.ScaleTargetRef.Name})
		require.GreaterOrEqual(t, h.MinReplicas, 2)
		served := adapterMetrics(t)
		var external, pods bool
		for _, m := range h.Metrics {
			switch {
			case m.External != nil:
				external = true
				require.Contains(t, served, m.External.Metric.Name, "adapter-rules.yaml serves the external metric")
				require.Equal(t, contract.TaskQueue, m.External.Metric.Selector.MatchLabels["taskqueue"])
			case m.Pods != nil:
				pods = true
				require.Contains(t, served, m.Pods.Metric.Name, "adapter-rules.yaml serves the pods metric")
			}
		}
		require.True(t, external && pods, "the server's backlog and the SDK's slots")
	}
	require.LessOrEqual(t, autoscalers, 1, "one autoscaler for the workers")
	if autoscalers == 1 {
		require.Nil(t, worker.Replicas, "the autoscaler owns the workers' replica count")
	} else {
		require.NotNil(t, worker.Replicas)
		require.GreaterOrEqual(t, *worker.Replicas, 2)
	}
	require.NotNil(t, gateway.Replicas)
	require.GreaterOrEqual(t, *gateway.Replicas, 2, "two gateways, so one can be drained")

	for _, o := range r["ServiceMonitor"] {
		sm := spec[serviceMonitor](t, o)
		require.True(t, labelsMatch(sm.Selector.MatchLabels, admin.Metadata.Labels), "the ServiceMonitor selects agentflow-admin")
		require.False(t, labelsMatch(sm.Selector.MatchLabels, r["Service"]["agentflow-gateway"].Metadata.Labels), "and not the APIs")
		require.Len(t, sm.Endpoints, 1)
		require.Equal(t, adminSvc.Ports[0].Name, sm.Endpoints[0].Port)
		require.Equal(t, "/metrics", sm.Endpoints[0].Path)
	}
}

// setting is where a container's setting comes from.
type setting struct {
	value     string // a literal, or the ConfigMap's value
	configMap string // the ConfigMap it comes from
	secret    string // or the Secret
	optional  bool
}

// settings are a container's environment: its env, over the ConfigMaps it
// takes whole. Every ConfigMap it names exists in the render.
func settings(t *testing.T, c container, r rendered) map[string]setting {
	t.Helper()
	env := map[string]setting{}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef == nil {
			continue
		}
		cm, ok := r["ConfigMap"][from.ConfigMapRef.Name]
		require.True(t, ok, "ConfigMap %s", from.ConfigMapRef.Name)
		for k, v := range cm.Data {
			env[k] = setting{value: v, configMap: cm.Metadata.Name}
		}
	}
	seen := map[string]bool{}
	for _, e := range c.Env {
		require.False(t, seen[e.Name], "%s is set twice", e.Name)
		seen[e.Name] = true
		s := setting{value: e.Value}
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			s = setting{secret: e.ValueFrom.SecretKeyRef.Name, optional: e.ValueFrom.SecretKeyRef.Optional}
			require.Equal(t, e.Name, e.ValueFrom.SecretKeyRef.Key, "a secret's key is its setting's name")
		}
		env[e.Name] = s
	}
	return env
}

// adapterMetrics are the metric names components/prometheus-adapter's
// rules serve.
func adapterMetrics(t *testing.T) []string {
	t.Helper()
	root, err := devstack.RepoRoot()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(root, "deploy", "kubernetes", "components", "prometheus-adapter", "adapter-rules.yaml"))
	require.NoError(t, err)
	var values struct {
		Rules map[string][]struct {
			Name struct {
				As string `yaml:"as"`
			} `yaml:"name"`
		} `yaml:"rules"`
	}
	require.NoError(t, yaml.Unmarshal(data, &values))
	var names []string
	for _, rules := range values.Rules {
		for _, r := range rules {
			names = append(names, r.Name.As)
		}
	}
	return names
}

func containerPort(t *testing.T, c container, name string) int {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s has no port %q", c.Name, name)
	return 0
}

func port(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	require.NoError(t, err, "address %q", addr)
	n, err := strconv.Atoi(p)
	require.NoError(t, err)
	return n
}

// imageTag is the tag of an image reference, "" when it has none.
func imageTag(image string) string {
	name := image[strings.LastIndex(image, "/")+1:]
	if _, tag, ok := strings.Cut(name, ":"); ok {
		return tag
	}
	return ""
}

// labelsMatch reports whether every label of sel is on labels.
func labelsMatch(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// has reports whether a container's settings include name.
func has(env map[string]setting, name string) bool {
	_, ok := env[name]
	return ok
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// mountedPod is what TestTemporalMTLSComponent reads of a Deployment.
type mountedPod struct {
	Template struct {
		Spec struct {
			Volumes []struct {
				Name   string `yaml:"name"`
				Secret *struct {
					SecretName string `yaml:"secretName"`
				} `yaml:"secret"`
			} `yaml:"volumes"`
			Containers []struct {
				Env          []envVar `yaml:"env"`
				VolumeMounts []struct {
					Name      string `yaml:"name"`
					MountPath string `yaml:"mountPath"`
					ReadOnly  bool   `yaml:"readOnly"`
				} `yaml:"volumeMounts"`
			} `yaml:"containers"`
		} `yaml:"spec"`
	} `yaml:"template"`
}

// TestTemporalMTLSComponent: with components/temporal-mtls every pod
// mounts the client certificate's Secret and points the Temporal clients'
// settings at files inside the mount.
func TestTemporalMTLSComponent(t *testing.T) {
	h := newHarness(t)
	r := index(decode(t, h.render(t, "", "temporal-mtls")))
	require.Len(t, r["Deployment"], 2)
	for name, o := range r["Deployment"] {
		pod := spec[mountedPod](t, o).Template.Spec
		secret := ""
		for _, v := range pod.Volumes {
			if v.Name == "temporal-tls" && v.Secret != nil {
				secret = v.Secret.SecretName
			}
		}
		require.Equal(t, "agentflow-temporal-tls", secret, name)
		mount := ""
		for _, m := range pod.Containers[0].VolumeMounts {
			if m.Name == "temporal-tls" {
				require.True(t, m.ReadOnly, name)
				mount = m.MountPath
			}
		}
		require.NotEmpty(t, mount, name)
		env := map[string]string{}
		for _, e := range pod.Containers[0].Env {
			env[e.Name] = e.Value
		}
		require.Equal(t, mount+"/tls.crt", env["TEMPORAL_TLS_CLIENT_CERT_PATH"], name)
		require.Equal(t, mount+"/tls.key", env["TEMPORAL_TLS_CLIENT_KEY_PATH"], name)
	}
}
