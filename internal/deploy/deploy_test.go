package deploy

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TestVersion: a worker names its deployment and build, or neither; what
// its results record as their build, and the options its Temporal worker
// polls with, follow from them.
func TestVersion(t *testing.T) {
	tests := []struct {
		name    string
		v       Version
		invalid string
		build   string
		options worker.DeploymentOptions
	}{
		{"unversioned", Version{}, "", "", worker.DeploymentOptions{}},
		{"versioned", Version{Name: "agentflow", BuildID: "v2"}, "", "agentflow:v2", worker.DeploymentOptions{
			UseVersioning:             true,
			Version:                   worker.WorkerDeploymentVersion{DeploymentName: "agentflow", BuildID: "v2"},
			DefaultVersioningBehavior: workflow.VersioningBehaviorPinned,
		}},
		{"a build without its deployment", Version{BuildID: "v2"}, "AGENTFLOW_BUILD_ID is set but AGENTFLOW_DEPLOYMENT_NAME is not", "", worker.DeploymentOptions{}},
		{"a deployment without a build", Version{Name: "agentflow"}, "AGENTFLOW_DEPLOYMENT_NAME is set but AGENTFLOW_BUILD_ID is not", "", worker.DeploymentOptions{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.invalid != "" {
				require.ErrorContains(t, tt.v.Validate(), tt.invalid)
				return
			}
			require.NoError(t, tt.v.Validate())
			require.Equal(t, tt.build != "", tt.v.On())
			require.Equal(t, tt.build, tt.v.Build())
			require.Equal(t, tt.options, tt.v.WorkerOptions())
		})
	}
}
