package deploy

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/devstack/devtest"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// TestCheckAndRegistration: the server takes a deployment and a build it
// has not seen yet (a worker's first poll creates them), and a build no
// worker of it has polled is not registered, so the worker is not ready.
func TestCheckAndRegistration(t *testing.T) {
	t.Parallel()
	address, namespace := devtest.Temporal(t)
	c, err := client.Dial(client.Options{HostPort: address, Namespace: namespace})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	v := Version{Name: "deploy-test-check", BuildID: "b1"}

	require.NoError(t, Check(t.Context(), c, v, namespace))

	var r Registration
	err = r.Check(t.Context(), c, v, "deploy-test-queue")
	require.ErrorContains(t, err, "build deploy-test-check:b1 is not registered with the Temporal server yet")
}
