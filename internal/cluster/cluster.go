package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/topology"
)

// appDB is agentflow's database, as the production topology names it.
const appDB = "agentflow_app"

// Options configure [Start].
type Options struct {
	// Dir holds the cluster's state and every process's log. Required.
	Dir string
	// Workers and Gateways are the numbers of agentflow's processes of
	// each role, each on a host of its own. Defaults 3 and 2.
	Workers, Gateways int
	// Env is added to every agentflow process's environment: the model,
	// AGENTFLOW_TOKENS, AGENTFLOW_EGRESS_ALLOW for the trial's own
	// servers (which listen on the network's Gateway address), …
	Env []string
	// Prepare, when set, is called once the network exists with this
	// machine's address on it (Cluster.Gateway), before any process
	// starts: the trial starts its own servers there and returns more
	// of Env (their addresses).
	Prepare func(gateway string) ([]string, error)
	// Binary is the agentflow worker program; default: built from the
	// repository into Dir/bin.
	Binary string
	// Logger receives lifecycle messages; Progress a line before a
	// Temporal binary is built. Default: none.
	Logger   *zap.Logger
	Progress io.Writer
}

// Cluster is agentflow on hosts of one machine: PostgreSQL with a
// streaming standby, the Temporal server's services each on its own host,
// and agentflow's workers and gateways, every client reaching every
// server through a link (Links) that a trial can cut. Stop it when done.
type Cluster struct {
	// Links are the fault proxies, one per client host and server, named
	// "<host>>pg", "<host>>temporal", "client>gateways".
	Links *Links
	// Gateways' gRPC and HTTP API behind their balancers; Addr is where
	// clients connect (through the client>gateways link for gRPC).
	GRPCBalancer, HTTPBalancer *Balancer
	// ClientAddr is the gateways' gRPC address as a client reaches it:
	// through the link client>gateways, then the balancer.
	ClientAddr string
	Workers    []*topology.Process
	Gateways   []*topology.Process
	// TemporalAddress is the frontend's, for the operator's own client;
	// DatabaseURL is agentflow's database through the operator's link to
	// the primary (repointed at a failover, as every client's).
	TemporalAddress, TemporalHTTPAddress string
	DatabaseURL                          string
	// ObjectStore is SeaweedFS on the s3 host, with agentflow's bucket.
	ObjectStore objstore.Config

	net              *Network
	hosts            map[string]*Host
	primary, standby *pgServer
	temporal         []*temporalService
	s3               *Proc
	dir, pgDir       string
	pgBin            string
	pgCred           *syscall.Credential
	log              *zap.Logger
	progress         io.Writer
}

// Start makes the network and its hosts and starts every part, in the
// order each needs the one before: PostgreSQL and its standby, the
// Temporal server, then the workers and the gateways.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, errors.New("cluster: Dir is required")
	}
	opts.Workers, opts.Gateways = cmp.Or(opts.Workers, 3), cmp.Or(opts.Gateways, 2)
	c := &Cluster{hosts: map[string]*Host{}, dir: opts.Dir, log: cmp.Or(opts.Logger, zap.NewNop()), progress: opts.Progress}
	var err error
	if c.pgBin, c.pgCred, err = devstack.PostgresPrograms(); err != nil {
		return nil, err
	}
	if c.net, err = Claim(ctx); err != nil {
		return nil, err
	}
	c.Links = newLinks(c.net.Gateway())
	if err := c.start(ctx, opts); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context, opts Options) error {
	begin := time.Now()
	root, err := devstack.RepoRoot()
	if err != nil {
		return err
	}
	server, err := devstack.Tool(ctx, root, "tools", "temporal-server", "go.temporal.io/server/cmd/server")
	if err != nil {
		return err
	}
	sqlTool, err := devstack.Tool(ctx, root, "tools", "temporal-sql-tool", "go.temporal.io/server/cmd/tools/sql")
	if err != nil {
		return err
	}
	bin := opts.Binary
	if bin == "" {
		if bin, err = topology.Build(ctx, filepath.Join(opts.Dir, "bin")); err != nil {
			return err
		}
	}
	names := []string{"pg-1", "pg-2", "s3"}
	for _, s := range temporalServices {
		names = append(names, s.host)
	}
	for i := range opts.Gateways {
		names = append(names, fmt.Sprintf("gateway-%d", i+1))
	}
	for i := range opts.Workers {
		names = append(names, fmt.Sprintf("worker-%d", i+1))
	}
	for _, name := range names {
		if c.hosts[name], err = c.net.AddHost(ctx, name); err != nil {
			return err
		}
	}
	if opts.Prepare != nil {
		more, err := opts.Prepare(c.Gateway())
		if err != nil {
			return err
		}
		opts.Env = append(slices.Clone(opts.Env), more...)
	}
	if err := c.startPostgres(ctx); err != nil {
		return err
	}
	if err := c.startObjects(ctx, root); err != nil {
		return err
	}
	if err := c.migrateTemporal(ctx, sqlTool); err != nil {
		return err
	}
	if err := c.startTemporal(ctx, server); err != nil {
		return err
	}
	c.log.Info("cluster platform started", zap.Duration("took", time.Since(begin)))
	return c.startAgentflow(ctx, opts, bin)
}

// startPostgres starts the primary and its standby in a folder the
// postgres user reaches (a test's folder may be closed to it), and
// agentflow's database.
func (c *Cluster) startPostgres(ctx context.Context) error {
	var err error
	if c.pgDir, err = os.MkdirTemp("", "agentflow-cluster-pg-"); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if err := os.Chmod(c.pgDir, 0o755); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if c.pgCred != nil {
		if err := os.Chown(c.pgDir, int(c.pgCred.Uid), int(c.pgCred.Gid)); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
	}
	if c.primary, err = c.startPrimary(ctx, c.hosts["pg-1"]); err != nil {
		return err
	}
	if c.standby, err = c.startStandby(ctx, c.hosts["pg-2"], c.primary); err != nil {
		return err
	}
	if err := c.primary.createDatabases(ctx, appDB); err != nil {
		return err
	}
	link, err := c.Links.Add("operator", "pg", c.primary.addr())
	if err != nil {
		return err
	}
	c.DatabaseURL = "postgres://postgres@" + link.Addr + "/" + appDB + "?sslmode=disable"
	return nil
}

// startAgentflow starts the workers, then the gateways and their
// balancers: each process reaches PostgreSQL and Temporal through links
// of its own.
func (c *Cluster) startAgentflow(ctx context.Context, opts Options, bin string) error {
	// Closed to tools (egress), beside the links and the processes' own.
	platform := []string{c.primary.addr(), c.standby.addr(), c.TemporalAddress, c.TemporalHTTPAddress,
		net.JoinHostPort(c.hosts["s3"].Addr.String(), strconv.Itoa(seaweedPorts(c.net.index).S3))}
	env := func(host string) ([]string, error) {
		pg, err := c.Links.Add(host, "pg", c.primary.addr())
		if err != nil {
			return nil, err
		}
		tc, err := c.Links.Add(host, "temporal", c.TemporalAddress)
		if err != nil {
			return nil, err
		}
		platform = append(platform, pg.Addr, tc.Addr)
		return append([]string{
			"DATABASE_URL=postgres://postgres@" + pg.Addr + "/" + appDB + "?sslmode=disable",
			"TEMPORAL_ADDRESS=" + tc.Addr,
			"AGENTFLOW_TEMPORAL_HTTP_ADDR=" + c.TemporalHTTPAddress,
			"TEMPORAL_NAMESPACE=" + devstack.DefaultNamespace,
		}, append(c.ObjectStore.Env(), opts.Env...)...), nil
	}
	for i := range opts.Workers {
		name := fmt.Sprintf("worker-%d", i+1)
		e, err := env(name)
		if err != nil {
			return err
		}
		h := c.hosts[name]
		c.Workers = append(c.Workers, topology.NewProcessOn(name, topology.RoleWorker, bin, c.dir, h.Addr.String(), h.Argv(nil, nil), e, c.log))
	}
	var grpcs, https []string
	for i := range opts.Gateways {
		name := fmt.Sprintf("gateway-%d", i+1)
		e, err := env(name)
		if err != nil {
			return err
		}
		h := c.hosts[name]
		p := topology.NewProcessOn(name, topology.RoleGateway, bin, c.dir, h.Addr.String(), h.Argv(nil, nil), e, c.log)
		c.Gateways = append(c.Gateways, p)
		grpcs, https = append(grpcs, p.GRPCAddr), append(https, p.HTTPAPIAddr)
	}
	procs := append(append([]*topology.Process{}, c.Workers...), c.Gateways...)
	for _, p := range procs {
		platform = append(platform, p.HTTPAddr)
		if p.GRPCAddr != "" {
			platform = append(platform, p.GRPCAddr, p.HTTPAPIAddr)
		}
	}
	platformEnv := "AGENTFLOW_PLATFORM_ADDRS=" + strings.Join(platform, ",")
	for _, p := range procs {
		p.AddEnv(platformEnv)
		if err := p.Start(ctx); err != nil {
			return err
		}
	}
	var err error
	gw := net.JoinHostPort(c.net.Gateway().String(), "0")
	if c.GRPCBalancer, err = newBalancer(gw, grpcs); err != nil {
		return fmt.Errorf("cluster: balancer: %w", err)
	}
	if c.HTTPBalancer, err = newBalancer(gw, https); err != nil {
		return fmt.Errorf("cluster: balancer: %w", err)
	}
	link, err := c.Links.Add("client", "gateways", c.GRPCBalancer.Addr)
	if err != nil {
		return err
	}
	c.ClientAddr = link.Addr
	return nil
}

// Gateway is this machine's address on the cluster's network: where a
// trial's own servers (the model, the APIs tools call) listen.
func (c *Cluster) Gateway() string { return c.net.Gateway().String() }

// Host is the host named name (pg-1, temporal-history-2, worker-1, …).
func (c *Cluster) Host(name string) *Host { return c.hosts[name] }

// Stop stops every process, then removes the links, the hosts and the
// network.
func (c *Cluster) Stop() error {
	for _, p := range append(append([]*topology.Process{}, c.Gateways...), c.Workers...) {
		_ = p.Kill()
	}
	for _, b := range []*Balancer{c.GRPCBalancer, c.HTTPBalancer} {
		if b != nil {
			_ = b.Close()
		}
	}
	for _, s := range c.temporal {
		s.proc.Kill()
	}
	if c.s3 != nil {
		c.s3.Kill()
	}
	for _, s := range []*pgServer{c.primary, c.standby} {
		if s != nil && s.proc != nil {
			s.proc.Kill()
		}
	}
	if c.Links != nil {
		c.Links.Close()
	}
	var errs []error
	if c.net != nil {
		errs = append(errs, c.net.Close())
	}
	if c.pgDir != "" {
		errs = append(errs, os.RemoveAll(c.pgDir))
	}
	return errors.Join(errs...)
}

// Temporal is the Temporal service running on the host named host
// (temporal-history-1, …), nil when there is none: a trial kills it and
// starts it again.
func (c *Cluster) Temporal(host string) *Proc {
	for _, s := range c.temporal {
		if s.host.Name == host {
			return s.proc
		}
	}
	return nil
}
