package k8sjob

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

const params = `{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer"}}}`

// TestParseConfig: every field of an entry's config is checked when the
// catalog is applied, with an error that names the field.
func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		name, config, want string
	}{
		{"the smallest", `{"namespace":"jobs","image":"busybox:1.37"}`, ""},
		{"everything", `{"namespace":"jobs","image":"ghcr.io/acme/report@sha256:abc","command":["report"],"args":["--q","{{args.query}}"],
			"env":[{"name":"LIMIT","value":"{{ args.limit }}"}],"resources":{"requests":{"cpu":"100m","memory":"64Mi"},"limits":{"cpu":"1","memory":"256Mi"}},
			"timeout_seconds":60,"service_account":"runner"}`, ""},
		{"no config", ``, "namespace and image are required"},
		{"an unknown field", `{"namespace":"jobs","image":"x","kubeconfig":"/root/.kube/config"}`, `unknown field "kubeconfig"`},
		{"no image", `{"namespace":"jobs"}`, "config.image"},
		{"a bad namespace", `{"namespace":"Jobs_1","image":"x"}`, `config.namespace "Jobs_1"`},
		{"a bad service account", `{"namespace":"jobs","image":"x","service_account":"Root!"}`, "config.service_account"},
		{"a timeout too long", `{"namespace":"jobs","image":"x","timeout_seconds":3600}`, "config.timeout_seconds 3600: want 1 to 3580"},
		{"a timeout longer than the call", `{"namespace":"jobs","image":"x","timeout_seconds":101}`,
			"config.timeout_seconds 101: a call of the tool may run 120 s (the entry's timeout_sec, default 120); a Job needs 20 s more than its timeout: give the entry timeout_sec: 121 or more"},
		{"a negative timeout", `{"namespace":"jobs","image":"x","timeout_seconds":-1}`, "config.timeout_seconds -1"},
		{"a placeholder in the command", `{"namespace":"jobs","image":"x","command":["sh","-c","{{args.query}}"]}`, "config.command[2]: the command is fixed"},
		{"an undeclared argument", `{"namespace":"jobs","image":"x","args":["{{args.nope}}"]}`, `config.args[0]: {{args.nope}}: the tool's parameters declare no argument "nope"`},
		{"another placeholder", `{"namespace":"jobs","image":"x","env":[{"name":"A","value":"{{ .Env.HOME }}"}]}`, "config.env[0].value"},
		{"a bad env name", `{"namespace":"jobs","image":"x","env":[{"name":"1A","value":"v"}]}`, `config.env[0].name "1A"`},
		{"an env name twice", `{"namespace":"jobs","image":"x","env":[{"name":"A","value":"v"},{"name":"A","value":"w"}]}`, `config.env[1].name "A": given twice`},
		{"an unknown resource", `{"namespace":"jobs","image":"x","resources":{"limits":{"nvidia.com/gpu":"1"}}}`, `unknown resource "nvidia.com/gpu"`},
		{"a bad quantity", `{"namespace":"jobs","image":"x","resources":{"requests":{"memory":"lots"}}}`, `config.resources.requests.memory "lots"`},
		{"a request over its limit", `{"namespace":"jobs","image":"x","resources":{"requests":{"cpu":"2"},"limits":{"cpu":"1"}}}`, "the request of cpu (2) is over its limit (1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseConfig(json.RawMessage(tc.config), json.RawMessage(params), agent.DefaultToolTimeout)
			if tc.want == "" {
				require.NoError(t, err)
				require.Positive(t, c.TimeoutSeconds)
				return
			}
			require.Error(t, err)
			require.Equal(t, agent.CodeInvalid, agent.ErrorCode(err))
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestParseAllow: the operator's list, and what it allows.
func TestParseAllow(t *testing.T) {
	a, err := ParseAllow("acme=acme-jobs:runner/ghcr.io/acme/*+acme-jobs/busybox:1.37, *=shared/alpine:3.22")
	require.NoError(t, err)
	for _, tc := range []struct {
		tenant, ns, sa, image string
		ok                    bool
	}{
		{"acme", "acme-jobs", "runner", "ghcr.io/acme/report:1", true},
		{"acme", "acme-jobs", "", "busybox:1.37", true},
		{"acme", "acme-jobs", "", "ghcr.io/acme/report:1", false}, // the rule names its account
		{"acme", "acme-jobs", "runner", "ghcr.io/evil/report:1", false},
		{"acme", "shared", "", "alpine:3.22", true},
		{"other", "acme-jobs", "runner", "ghcr.io/acme/report:1", false}, // another tenant's namespace
		{"other", "shared", "", "alpine:3.22", true},
		{"other", "shared", "", "alpine:3.23", false},
	} {
		err := a.Check(tc.tenant, tc.ns, tc.sa, tc.image)
		if tc.ok {
			require.NoError(t, err, "%+v", tc)
		} else {
			require.ErrorContains(t, err, "the operator does not allow", "%+v", tc)
		}
	}
	require.True(t, Allow{}.Empty())
	for _, bad := range []string{"acme", "acme=jobs", "acme=Jobs/x", "acme=jobs:Bad_SA/x", "acme=jobs/a*b", "=jobs/x"} {
		_, err := ParseAllow(bad)
		require.Error(t, err, bad)
	}
}

// TestManifest: the Job a call makes, from the entry and the arguments.
func TestManifest(t *testing.T) {
	c, err := parseConfig(json.RawMessage(`{"namespace":"jobs","image":"busybox:1.37","command":["sh"],"args":["-c","echo $Q","{{args.query}}"],
		"env":[{"name":"Q","value":"{{args.query}}"},{"name":"N","value":"{{args.limit}}"}],"resources":{"limits":{"memory":"64Mi"}},"timeout_seconds":30}`), json.RawMessage(params), agent.DefaultToolTimeout)
	require.NoError(t, err)
	target := Target{TenantID: "acme", JobID: "job/with slashes", CallID: "call_1", Tool: "report"}
	job, err := Manifest(c, target, json.RawMessage(`{"query":"a b","limit":5}`))
	require.NoError(t, err)
	require.Equal(t, target.Name(), job.Name)
	require.LessOrEqual(t, len(job.Name), 63)
	require.Equal(t, "jobs", job.Namespace)
	require.Equal(t, int64(30), *job.Spec.ActiveDeadlineSeconds)
	require.Equal(t, int32(0), *job.Spec.BackoffLimit)
	ctr := job.Spec.Template.Spec.Containers[0]
	require.Equal(t, []string{"-c", "echo $Q", "a b"}, ctr.Args)
	require.Equal(t, "a b", ctr.Env[0].Value)
	require.Equal(t, "5", ctr.Env[1].Value)
	require.Equal(t, "64Mi", ctr.Resources.Limits.Memory().String())
	require.False(t, *job.Spec.Template.Spec.AutomountServiceAccountToken)
	require.Equal(t, "acme", job.Labels[LabelTenant])
	require.Equal(t, "call_1", job.Labels[LabelCall])
	require.Contains(t, job.Labels[LabelTurn], "sha256-", "a value no label may hold is hashed")
	require.Equal(t, "job/with slashes", job.Annotations[LabelTurn])

	again, err := Manifest(c, target, json.RawMessage(`{"query":"a b","limit":5}`))
	require.NoError(t, err)
	require.Equal(t, job.Annotations[AnnotationSpec], again.Annotations[AnnotationSpec], "the same call makes the same Job")
	other := target
	other.CallID = "call_2"
	require.NotEqual(t, target.Name(), other.Name())

	_, err = Manifest(c, target, json.RawMessage(`{"limit":5}`))
	require.ErrorContains(t, err, `argument "query" is required`)
	require.Equal(t, agent.CodeInvalid, agent.ErrorCode(err))
}

// FuzzParseConfig: any catalog config is refused as invalid input, or
// read with a timeout in range; it never panics.
func FuzzParseConfig(f *testing.F) {
	f.Add(`{"namespace":"jobs","image":"busybox:1.37"}`)
	f.Add(`{"namespace":"jobs","image":"x","args":["{{args.query}}"],"env":[{"name":"A","value":"{{ args.limit }}"}]}`)
	f.Add(`{"namespace":"jobs","image":"x","resources":{"requests":{"cpu":"2"},"limits":{"cpu":"1"}}}`)
	f.Add(`{"namespace":"jobs","image":"x","timeout_seconds":1e9}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, config string) {
		call := time.Duration(agent.MaxToolTimeoutSec) * time.Second
		c, err := parseConfig(json.RawMessage(config), json.RawMessage(params), call)
		if err != nil {
			require.Equal(t, agent.CodeInvalid, agent.ErrorCode(err), "%v", err)
			return
		}
		require.True(t, c.TimeoutSeconds >= 1 && c.TimeoutSeconds <= MaxTimeoutSeconds, "timeout %d", c.TimeoutSeconds)
		require.LessOrEqual(t, time.Duration(c.TimeoutSeconds+CallMargin)*time.Second, call, "the Job fits in the call")
	})
}

// FuzzParseAllow: any operator list is refused or read; it never panics.
func FuzzParseAllow(f *testing.F) {
	f.Add(`demo=jobs/busybox:1.37`)
	f.Add(`*=jobs:runner/ghcr.io/acme/*+busybox:1.37,acme=batch/x`)
	f.Add(`=`)
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = ParseAllow(s)
	})
}

// TestJobFitsTheCall: a Job longer than the default call is allowed when
// the entry gives its calls the time (timeout_sec, one rule for every
// kind), by default the call's time less CallMargin; one that would
// outlast its call is refused, saying what to write.
func TestJobFitsTheCall(t *testing.T) {
	spec := func(timeoutSec int, config string) agent.Tool {
		return agent.Tool{Name: "report", Kind: KindName, TimeoutSec: timeoutSec, Parameters: json.RawMessage(params), Config: json.RawMessage(config)}
	}
	for _, tc := range []struct {
		name       string
		timeoutSec int
		config     string
		job        int
		want       string
	}{
		{"default call, default job", 0, `{"namespace":"jobs","image":"x"}`, 100, ""},
		{"a long call, default job", 900, `{"namespace":"jobs","image":"x"}`, 880, ""},
		{"a long call and job", 3600, `{"namespace":"jobs","image":"x","timeout_seconds":3580}`, 3580, ""},
		{"a long job, default call", 0, `{"namespace":"jobs","image":"x","timeout_seconds":600}`, 0, "give the entry timeout_sec: 620 or more"},
		{"a job as long as its call", 600, `{"namespace":"jobs","image":"x","timeout_seconds":600}`, 0, "give the entry timeout_sec: 620 or more"},
		{"a call too short for any job", 15, `{"namespace":"jobs","image":"x"}`, 0, "give the entry timeout_sec: 21 or more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec(tc.timeoutSec, tc.config)
			c, err := parseConfig(s.Config, s.Parameters, s.CallTimeout(0))
			if tc.want != "" {
				require.ErrorContains(t, err, tc.want)
				require.Equal(t, agent.CodeInvalid, agent.ErrorCode(err))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.job, c.TimeoutSeconds)
		})
	}
}
