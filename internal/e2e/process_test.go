package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/tools"
)

// procEnv runs the worker binary as processes of their own, so that a test
// can kill one the hard way and start another.
type procEnv struct {
	t       *testing.T
	bin     string
	environ []string
	dbURL   string
	queue   string
	// address and namespace are the Temporal server's and agentflow's.
	address, namespace string
	client             client.Client
	logger             *zap.Logger
}

// buildMu keeps the tests that build the worker from compiling it side
// by side: the first build fills the cache and the others only link, where
// five cold builds at once on two cores took minutes.
var buildMu sync.Mutex

// newProcEnv builds the worker (with the scripted model), applies the catalog documents and connects
// a client; the workers answer with modelScript. The caller's own deadline
// starts after it: a build does not eat a turn's time.
func newProcEnv(t *testing.T, modelScript string, catalogs ...string) *procEnv {
	t.Helper()
	dir := t.TempDir()
	p := &procEnv{t: t, bin: filepath.Join(dir, "worker"), dbURL: devtest.Database(t), queue: "agentflow-proc-" + testserver.RandomID(),
		logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))}
	address, namespace := devtest.Temporal(t)
	p.address, p.namespace = address, namespace
	buildMu.Lock()
	out, err := exec.Command("go", "build", "-tags", "scripted", "-o", p.bin, "github.com/agentflow/agentflow/worker").CombinedOutput()
	buildMu.Unlock()
	require.NoError(t, err, string(out))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	scriptFile := filepath.Join(dir, "script.yaml")
	require.NoError(t, os.WriteFile(scriptFile, []byte(modelScript), 0o644))
	p.environ = append(os.Environ(),
		"DATABASE_URL="+p.dbURL, "TEMPORAL_ADDRESS="+address, "TEMPORAL_NAMESPACE="+namespace,
		"AGENTFLOW_TASK_QUEUE="+p.queue, "AGENTFLOW_HTTP_ADDR=off", "AGENTFLOW_SCRIPT="+scriptFile,
		"AGENTFLOW_LOG_LEVEL=warn", "AGENTFLOW_ROLES=worker")

	st, err := store.Open(ctx, p.dbURL, store.Options{Logger: p.logger})
	require.NoError(t, err)
	defer st.Close()
	kinds, err := tools.NewRegistry(tools.Deps{Logger: p.logger}, tools.Builtin()...)
	require.NoError(t, err)
	require.NoError(t, testserver.ApplyCatalogs(ctx, st, kinds, catalogs...))

	p.client, err = client.DialContext(ctx, client.Options{HostPort: address, Namespace: namespace})
	require.NoError(t, err)
	t.Cleanup(p.client.Close)
	return p
}

// startWorker starts a worker process; the test's cleanup kills it.
func (p *procEnv) startWorker() *exec.Cmd {
	p.t.Helper()
	cmd := exec.Command(p.bin)
	cmd.Env = p.environ
	cmd.Stderr = os.Stderr
	require.NoError(p.t, cmd.Start())
	p.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}
