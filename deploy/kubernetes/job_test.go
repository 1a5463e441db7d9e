package kubernetes

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/tools/k8sjob"
)

// TestJobManifest: the Job a k8s_job call makes, with every field the
// catalog can set, passes the Kubernetes API's schemas strictly, as the
// manifests here do.
func TestJobManifest(t *testing.T) {
	h := newHarness(t)
	c := k8sjob.Config{
		Namespace: "agent-jobs", Image: "busybox:1.37", Command: []string{"sh", "-c"}, Args: []string{"echo {{args.q}}"},
		Env:            []k8sjob.EnvVar{{Name: "Q", Value: "{{args.q}}"}},
		Resources:      k8sjob.Resources{Requests: map[string]string{"cpu": "100m", "memory": "64Mi"}, Limits: map[string]string{"memory": "128Mi"}},
		TimeoutSeconds: 60, ServiceAccount: "runner",
	}
	job, err := k8sjob.Manifest(c, k8sjob.Target{TenantID: "acme", JobID: "turn/1", CallID: "call_1", Tool: "report"}, json.RawMessage(`{"q":"hi"}`))
	require.NoError(t, err)
	raw, err := json.Marshal(job)
	require.NoError(t, err)
	var obj map[string]any
	require.NoError(t, json.Unmarshal(raw, &obj))
	delete(obj, "status") // the cluster's to write
	raw, err = json.Marshal(dropNulls(obj))
	require.NoError(t, err)
	results := h.validate(t, raw)
	require.Len(t, results, 1)
	require.Equal(t, "statusValid", results[0].Status, "%s", results[0].Msg)
}

// dropNulls removes the null fields encoding/json writes for unset
// timestamps, which a manifest leaves out.
func dropNulls(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if e == nil {
				delete(v, k)
				continue
			}
			v[k] = dropNulls(e)
		}
	case []any:
		for i := range v {
			v[i] = dropNulls(v[i])
		}
	}
	return v
}
