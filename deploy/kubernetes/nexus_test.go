package kubernetes

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/agentflow/agentflow/docs"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/nexusdoor"
)

// keyRef is an env var's value from a key of a ConfigMap or a Secret.
type keyRef struct {
	Name     string `yaml:"name"`
	Key      string `yaml:"key"`
	Optional bool   `yaml:"optional"`
}

// podTemplate is what TestNexusEndpointsComponent reads of a Deployment
// or a Job.
type podTemplate struct {
	Template struct {
		Spec struct {
			Containers []struct {
				Image   string   `yaml:"image"`
				Command []string `yaml:"command"`
				EnvFrom []struct {
					ConfigMapRef *ref `yaml:"configMapRef"`
				} `yaml:"envFrom"`
				Env []struct {
					Name      string `yaml:"name"`
					Value     string `yaml:"value"`
					ValueFrom *struct {
						ConfigMapKeyRef *keyRef `yaml:"configMapKeyRef"`
						SecretKeyRef    *keyRef `yaml:"secretKeyRef"`
					} `yaml:"valueFrom"`
				} `yaml:"env"`
			} `yaml:"containers"`
		} `yaml:"spec"`
	} `yaml:"template"`
}

// env is the first container's env vars by name: where each comes from.
func (p podTemplate) env() map[string]keyRef {
	out := map[string]keyRef{}
	for _, e := range p.Template.Spec.Containers[0].Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil:
			out[e.Name] = *e.ValueFrom.ConfigMapKeyRef
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			out[e.Name] = *e.ValueFrom.SecretKeyRef
		default:
			out[e.Name] = keyRef{}
		}
	}
	return out
}

// contractFile is the Nexus service's contract, which the endpoints'
// description names.
const contractFile = "proto/agentflow/v1/agents.nexusrpc.yaml"

// TestNexusEndpointsComponent: with components/nexus-endpoints the
// workers read AGENTFLOW_NEXUS_BINDINGS from the component's ConfigMap
// (and the gateways do not), and the Job creates the endpoints of those
// same bindings in the workers' Temporal namespace, with the image
// docker-compose.yml runs the temporal CLI from.
func TestNexusEndpointsComponent(t *testing.T) {
	h := newHarness(t)
	r := index(decode(t, h.render(t, "", "nexus-endpoints")))

	worker := spec[podTemplate](t, r["Deployment"]["agentflow-worker"])
	bindings, ok := worker.env()["AGENTFLOW_NEXUS_BINDINGS"]
	require.True(t, ok, "the workers get the bindings")
	cm, ok := r["ConfigMap"][bindings.Name]
	require.True(t, ok, "ConfigMap %s", bindings.Name)
	require.Contains(t, cm.Data, bindings.Key)
	require.Empty(t, cm.Data[bindings.Key], "the component alone binds no queue: it opens no tenant")
	gw := spec[podTemplate](t, r["Deployment"]["agentflow-gateway"])
	require.NotContains(t, gw.env(), "AGENTFLOW_NEXUS_BINDINGS", "only workers serve the service")

	require.Len(t, r["Job"], 1)
	job := spec[podTemplate](t, r["Job"]["agentflow-nexus-endpoints"])
	env := job.env()
	require.Equal(t, bindings, env["AGENTFLOW_NEXUS_BINDINGS"], "the Job creates the endpoints of the workers' bindings")
	settings := worker.Template.Spec.Containers[0].EnvFrom[0].ConfigMapRef.Name
	for _, k := range []string{"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE"} {
		require.Equal(t, keyRef{Name: settings, Key: k}, env[k], "the Job reaches the workers' frontend and namespace")
	}
	require.Equal(t, keyRef{Name: "agentflow", Key: "TEMPORAL_API_KEY", Optional: true}, env["TEMPORAL_API_KEY"])

	data, err := os.ReadFile(filepath.Join(h.root, "docker-compose.yml"))
	require.NoError(t, err)
	var compose struct {
		Services map[string]struct {
			Image string `yaml:"image"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(data, &compose))
	require.Equal(t, compose.Services["temporal-init"].Image, job.Template.Spec.Containers[0].Image,
		"the temporal CLI of docker-compose.yml's temporal-init")
	require.FileExists(t, filepath.Join(h.root, contractFile), "the endpoints' description names the contract")
}

// TestNexusEndpointsOverlay: the overlay patches
// docs/operations/kubernetes.md shows work: the operator's bindings
// replace the component's example for the workers and the Job, and on
// Temporal Cloud the Job is left out.
func TestNexusEndpointsOverlay(t *testing.T) {
	h := newHarness(t)
	blocks := docs.Blocks(docSection(t, "operations/kubernetes.md", "Nexus endpoints"), "yaml")
	require.Len(t, blocks, 2)
	for _, block := range blocks {
		var overlay struct {
			Patches []any `yaml:"patches"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(block), &overlay))
		require.NotEmpty(t, overlay.Patches)
		r := index(decode(t, renderPatched(t, h, overlay.Patches)))
		worker := spec[podTemplate](t, r["Deployment"]["agentflow-worker"]).env()["AGENTFLOW_NEXUS_BINDINGS"]
		if strings.Contains(block, "$patch: delete") {
			require.Empty(t, r["Job"], "on Temporal Cloud the Job is left out")
			require.NotEmpty(t, worker.Name, "and the workers keep their bindings")
			continue
		}
		_, value, ok := strings.Cut(block, "value: ")
		require.True(t, ok)
		value = strings.TrimSpace(value)
		require.Equal(t, value, r["ConfigMap"][worker.Name].Data["AGENTFLOW_NEXUS_BINDINGS"], "the workers get the operator's bindings")
		parsed, err := nexusdoor.ParseBindings(value, allRoles())
		require.NoError(t, err, "the page's bindings")
		require.NotEmpty(t, parsed)
		require.Equal(t, worker, spec[podTemplate](t, r["Job"]["agentflow-nexus-endpoints"]).env()["AGENTFLOW_NEXUS_BINDINGS"], "and the Job")
	}
}

// TestNexusEndpointsScript: the Job's script, run with a temporal CLI
// that records its calls, makes an endpoint per bound queue, named as
// the queue, in the namespace it is given, or updates one that exists;
// a call that fails fails the Job, which Kubernetes retries.
func TestNexusEndpointsScript(t *testing.T) {
	h := newHarness(t)
	job := spec[podTemplate](t, index(decode(t, h.render(t, "", "nexus-endpoints")))["Job"]["agentflow-nexus-endpoints"])
	command := job.Template.Spec.Containers[0].Command
	require.Len(t, command, 3)
	require.Equal(t, []string{"/bin/sh", "-c"}, command[:2])

	bin := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bin, "temporal"), []byte(`#!/bin/sh
echo "$*" >> "$CALLS"
case "$*" in
"operator nexus endpoint get --name agents-care") exit 0 ;;
"operator nexus endpoint get "*) exit 1 ;;
"operator nexus endpoint create --name broken "*) exit 1 ;;
esac
`), 0o755))
	args := func(queue string) string {
		return "--name " + queue + " --target-namespace agentflow --target-task-queue " + queue + " --description agentflow.v1.Agents: " + contractFile
	}
	for _, tc := range []struct {
		name, bindings string
		calls          []string
		fails          bool
	}{
		{name: "an endpoint per queue", bindings: "agents-billing=acme:user+approver:billing-process, agents-care=care", calls: []string{
			"operator nexus endpoint get --name agents-billing",
			"operator nexus endpoint create " + args("agents-billing"),
			"operator nexus endpoint get --name agents-care",
			"operator nexus endpoint update " + args("agents-care"),
		}},
		{name: "none", bindings: ""},
		{name: "a call that fails", bindings: "broken=acme,agents-billing=acme", fails: true, calls: []string{
			"operator nexus endpoint get --name broken",
			"operator nexus endpoint create " + args("broken"),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := filepath.Join(t.TempDir(), "calls")
			cmd := exec.Command("/bin/sh", "-c", command[2])
			cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "CALLS=" + calls, "TEMPORAL_NAMESPACE=agentflow", "AGENTFLOW_NEXUS_BINDINGS=" + tc.bindings}
			out, err := cmd.CombinedOutput()
			if tc.fails {
				require.Error(t, err, "%s", out)
			} else {
				require.NoError(t, err, "%s", out)
			}
			var got []string
			if data, err := os.ReadFile(calls); err == nil {
				got = strings.Split(strings.TrimSpace(string(data)), "\n")
			}
			require.Equal(t, tc.calls, got)
		})
	}
}

// renderPatched builds the base with components/nexus-endpoints and an
// overlay's patches.
func renderPatched(t *testing.T, h *harness, patches []any) []byte {
	t.Helper()
	dir := t.TempDir()
	rel := func(p string) string {
		r, err := filepath.Rel(dir, filepath.Join(h.root, "deploy", "kubernetes", p))
		require.NoError(t, err)
		return r
	}
	k, err := yaml.Marshal(map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
		"resources": []string{rel("base")}, "components": []string{rel("components/nexus-endpoints")},
		"patches": patches,
	})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), k, 0o644))
	cmd := exec.Command(h.kustomize, "build", dir)
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		t.Fatalf("kustomize build: %s", exit.Stderr)
	}
	require.NoError(t, err)
	return out
}

// allRoles are the roles a binding may give, as the worker reads them.
func allRoles() []string {
	var roles []string
	for _, role := range gateway.AllRoles() {
		roles = append(roles, string(role))
	}
	return roles
}
