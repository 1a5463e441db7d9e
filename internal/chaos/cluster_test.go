package chaos

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/checker"
	"github.com/agentflow/agentflow/internal/cluster"
)

var (
	clusterFull    = flag.Bool("cluster.full", false, "run every cluster trial (go tool task chaos:cluster)")
	clusterOnly    = flag.String("cluster.only", "", "run only the cluster trials whose ids or names match this regexp")
	clusterClients = flag.Int("cluster.clients", 6, "the workload's clients, each starting turn after turn")
)

// TestClusterTrials runs the cluster trials — in `go tool task test` the
// short ones (a partition and a failover), with -cluster.full all — each
// under a workload the checker judges, and prints the table. It needs
// root, as network namespaces do; CI runs as root.
func TestClusterTrials(t *testing.T) {
	if err := cluster.Available(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 110*time.Minute)
	defer cancel()
	dir, err := clusterDir()
	require.NoError(t, err)
	logger, err := zap.Config{
		Level: zap.NewAtomicLevelAt(zap.InfoLevel), Encoding: "console", EncoderConfig: zap.NewDevelopmentEncoderConfig(),
		OutputPaths: []string{filepath.Join(dir, "trials.log")}, ErrorOutputPaths: []string{"stderr"},
	}.Build()
	require.NoError(t, err)
	e, err := startCluster(ctx, dir, logger)
	require.NoError(t, err, "logs in %s", dir)
	t.Cleanup(func() {
		require.NoError(t, e.stop())
		if !t.Failed() {
			_ = os.RemoveAll(dir)
		}
	})
	var only *regexp.Regexp
	if *clusterOnly != "" {
		only = regexp.MustCompile(*clusterOnly)
	}
	var reports []checker.Report
	for i, tr := range clusterTrials() {
		if !*clusterFull && !tr.short || only != nil && !only.MatchString(tr.id) && !only.MatchString(tr.name) {
			continue
		}
		rep, err := runClusterTrial(ctx, e, tr, fmt.Sprintf("t%d%s", i, tr.id))
		reports = append(reports, rep)
		require.NoError(t, err, "logs in %s", dir)
		if tr.catch == nil {
			require.NoError(t, rep.Err(), "%s (logs in %s)", tr.name, dir)
			continue
		}
		for _, k := range tr.catch {
			require.Positive(t, rep.Count(k), "the checker finds %s in %s:\n%s", k, tr.name, checker.Table([]checker.Report{rep}))
		}
	}
	fmt.Printf("cluster trials (logs in %s):\n%s", dir, checker.Table(reports))
}
