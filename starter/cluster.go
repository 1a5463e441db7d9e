package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/cluster"
	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/server"
)

// startCluster starts the production topology as a cluster of hosts on
// this machine (internal/cluster, `up --cluster`): PostgreSQL with a
// synchronous standby, the Temporal server's services, three workers and
// two gateways, each on a host of its own, the gateways behind a balancer.
// It needs root, which clusterAvailable asks for before anything starts.
//
// What --production does and the cluster cannot:
//   - its state is kept only in logs: PostgreSQL's data is made anew at
//     each start and removed at the stop (internal/cluster);
//   - the gateways listen on their hosts' addresses, not on loopback, so
//     the chat page is not signed in with the development token (a
//     gateway refuses one there) and asks for a token;
//   - the hosts do not reach this machine's loopback, where the sample
//     catalog's data agent looks for the flights API, so it is not served
//     and the data agent's fetches fail;
//   - the frontend is at port 7233 of its own host, whatever
//     --temporal-port says, and no gateway takes AGENTFLOW_GRPC_ADDR: a
//     client is told the balancer's address.
func (l *local) startCluster(ctx context.Context, out io.Writer, state string) error {
	if os.Getenv("TEMPORAL_ADDRESS") != "" || os.Getenv("DATABASE_URL") != "" {
		return errors.New("--cluster starts its own PostgreSQL and Temporal server: unset DATABASE_URL and TEMPORAL_ADDRESS")
	}
	if state == "" {
		state = filepath.Join(".data", "cluster")
	}
	dir, err := filepath.Abs(state)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	l.cfg.ChatDevToken = ""
	// Blank, not inherited: a gateway off loopback refuses to start with one.
	env := append(l.processEnv(), server.EnvChatDevToken+"=")
	fmt.Fprintln(out, "Starting the cluster: PostgreSQL and its standby, the Temporal server's five services, three workers and two gateways, each on a host of its own…")
	c, err := cluster.Start(ctx, cluster.Options{Dir: dir, Workers: 3, Gateways: 2, Env: env, Logger: l.logger, Progress: out})
	if err != nil {
		return err
	}
	if err := l.ensureTeams(ctx, c.TemporalAddress); err != nil {
		return errors.Join(err, c.Stop())
	}
	l.cluster = c
	return nil
}

// clusterAvailable says why this machine cannot run --cluster (it needs
// root), before anything is read or started.
func (p productionFlags) clusterAvailable() error {
	if !*p.cluster {
		return nil
	}
	if err := cluster.Available(); err != nil {
		return fmt.Errorf("--cluster runs each part on a host of its own: %w", err)
	}
	return nil
}

// ensureTeams makes the teams' namespace and the Nexus endpoints on the
// cluster's Temporal server, as --production's stack does.
func (l *local) ensureTeams(ctx context.Context, address string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := devstack.EnsureNamespace(ctx, address, teamsNamespace); err != nil {
		return err
	}
	c, err := client.DialContext(ctx, client.Options{HostPort: address, Namespace: devstack.DefaultNamespace, Logger: quietLogger{}})
	if err != nil {
		return fmt.Errorf("nexus endpoints: %w", err)
	}
	defer c.Close()
	for _, e := range l.nexusEndpoints(devstack.DefaultNamespace) {
		if err := devstack.EnsureNexusEndpoint(ctx, c, e); err != nil {
			return err
		}
	}
	return nil
}

// stopCluster stops every process and removes the hosts (their network
// namespaces), the bridge and PostgreSQL's data.
func (l *local) stopCluster() {
	if err := l.cluster.Stop(); err != nil {
		l.logger.Warn("stop cluster", zap.Error(err))
	}
}

func (l *local) printClusterHowTo(out io.Writer) {
	c := l.cluster
	fmt.Fprintf(out, `
agentflow is running as a cluster of hosts on this machine.
  gRPC API:  %s (%s): the two gateways' balancer, through the link client>gateways
  HTTP API:  http://%s (the two gateways' balancer)
  Chat page: %s
  Temporal:  %s (namespace %s; its HTTP API %s)
  Web UI:    (none: the Temporal server has none, as with --production)
  Postgres:  %s (the primary, through the operator's link; pg-2 is its synchronous standby)
  Objects:   %s
  Model:     %s
  Flights:   not served: the data agent's catalog names %s, which is each host's own loopback
  Teams:     %s
  State:     %s (a log per process: <host>.log, postgres-pg-1.log, …; the databases go at the stop)

Hosts (network namespaces on a bridge, which only this machine reaches; this machine is %s on it):
%s
Try:
  export TEMPORAL_ADDRESS=%s AGENTFLOW_GRPC_ADDR=%s
  go run ./starter chat "What is 12.5 * 4?"
  go run ./starter run --tenant demo "What is 12.5 * 4?"
  go run ./starter catalog apply -f catalog/ --dry-run
  .bin/temporal workflow list --address %s
`, c.ClientAddr, l.tokenNote(), c.HTTPBalancer.Addr, l.chatLink(), c.TemporalAddress, devstack.DefaultNamespace,
		c.TemporalHTTPAddress, c.DatabaseURL, "SeaweedFS on host s3, "+c.ObjectStore.Endpoint+" (bucket "+c.ObjectStore.Bucket+")", l.modelName(), flightsAddr, l.teamsNote(),
		filepath.Dir(c.Workers[0].Log), c.Gateway(), l.hostsTable(), c.TemporalAddress, c.ClientAddr, c.TemporalAddress)
}

// hostsTable is a line per host: its name, its address and what runs on it.
func (l *local) hostsTable() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, h := range l.cluster.Hosts() {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", h.Name, h.Addr, l.hostRole(h.Name))
	}
	_ = tw.Flush()
	return b.String()
}

// hostRole says what runs on the host named name.
func (l *local) hostRole(name string) string {
	for _, p := range l.cluster.Gateways {
		if p.Name == name {
			return "gateway: gRPC " + port(p.GRPCAddr) + ", HTTP API " + port(p.HTTPAPIAddr) + ", health " + port(p.HTTPAddr)
		}
	}
	for _, p := range l.cluster.Workers {
		if p.Name == name {
			return "worker: health " + port(p.HTTPAddr)
		}
	}
	switch name {
	case "pg-1":
		return "PostgreSQL primary"
	case "pg-2":
		return "PostgreSQL standby"
	case "s3":
		return "object store (S3)"
	}
	if svc, ok := strings.CutPrefix(name, "temporal-"); ok {
		return "Temporal server: " + strings.TrimRight(svc, "-0123456789")
	}
	return ""
}

// port is the port of addr, as :port.
func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return ":" + p
}
