package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/agentflow/agentflow/internal/devstack"
)

// The Temporal server's databases, as devstack names them.
const (
	temporalDB   = "temporal"
	visibilityDB = "temporal_visibility"
)

// The ports of the Temporal services, each on its own host's address.
const (
	frontendGRPC = "7233"
	frontendHTTP = "7243"
)

// temporalService is one service of the Temporal server on a host.
type temporalService struct {
	service string // frontend, history, matching or worker
	host    *Host
	proc    *Proc
}

// readyPort is the port the service listens on once it runs, as
// serverConfig gives it: the frontend's API, the others' membership
// (the worker service serves no API).
func (s *temporalService) readyPort() string {
	return map[string]string{"frontend": frontendGRPC, "history": "6934", "matching": "6935", "worker": "6939"}[s.service]
}

// listening answers nil once the host takes connections on port.
func listening(host *Host, port string) func(context.Context) error {
	return func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host.Addr.String(), port))
		if err != nil {
			return err
		}
		return c.Close()
	}
}

// temporalServices are the hosts of the server's services, by the host's
// name: the frontend, two history hosts, matching and the worker service
// (the server's own system workflows).
var temporalServices = []struct{ host, service string }{
	{"temporal-frontend", "frontend"},
	{"temporal-history-1", "history"},
	{"temporal-history-2", "history"},
	{"temporal-matching", "matching"},
	{"temporal-worker", "worker"},
}

// serverConfig is one service's static config: every service's ports
// (each listens on its host's address; the others are found through
// membership, at the addresses they broadcast), PostgreSQL through the
// host's link to it, and the dynamic config beside it.
var serverConfig = template.Must(template.New("config").Parse(`# Written by internal/cluster.
log:
  stdout: true
  level: warn
persistence:
  defaultStore: default
  visibilityStore: visibility
  numHistoryShards: {{.Shards}}
  datastores:
{{- range $name, $db := .Stores}}
    {{$name}}:
      sql:
        pluginName: postgres12
        databaseName: {{$db}}
        connectAddr: "{{$.DBAddr}}"
        connectProtocol: tcp
        user: postgres
        maxConns: 20
        maxIdleConns: 20
        maxConnLifetime: 1h
{{- end}}
global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: {{.IP}}
services:
  frontend:
    rpc: {grpcPort: 7233, membershipPort: 6933, httpPort: 7243, bindOnIP: {{.IP}}}
  history:
    rpc: {grpcPort: 7234, membershipPort: 6934, bindOnIP: {{.IP}}}
  matching:
    rpc: {grpcPort: 7235, membershipPort: 6935, bindOnIP: {{.IP}}}
  worker:
    rpc: {grpcPort: 7239, membershipPort: 6939, bindOnIP: {{.IP}}}
clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: active
  currentClusterName: active
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: frontend
      rpcAddress: "{{.Frontend}}"
publicClient:
  hostPort: "{{.Frontend}}"
dcRedirectionPolicy:
  policy: noop
dynamicConfigClient:
  filepath: "{{.DynamicConfig}}"
  pollInterval: 10s
`))

// migrateTemporal creates the server's databases on the primary and
// brings their schemas to the server's version with its SQL tool.
func (c *Cluster) migrateTemporal(ctx context.Context, sqlTool string) error {
	if err := c.primary.createDatabases(ctx, temporalDB, visibilityDB); err != nil {
		return err
	}
	for _, d := range []struct{ name, schema string }{
		{temporalDB, "postgresql/v12/temporal"},
		{visibilityDB, "postgresql/v12/visibility"},
	} {
		base := []string{"--plugin", "postgres12", "--endpoint", c.primary.host.Addr.String(), "--port", pgPort,
			"--user", "postgres", "--database", d.name}
		for _, args := range [][]string{{"setup-schema", "-v", "0.0"}, {"update-schema", "--schema-name", d.schema}} {
			cmd := exec.CommandContext(ctx, sqlTool, append(base, args...)...)
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("cluster: temporal schema %s %s: %w\n%s", d.name, args[0], err, strings.TrimSpace(string(out)))
			}
		}
	}
	return nil
}

// startTemporal starts each service on its host, the frontend first,
// and waits until the namespace is served by all of them.
func (c *Cluster) startTemporal(ctx context.Context, server string) error {
	frontend := net.JoinHostPort(c.hosts["temporal-frontend"].Addr.String(), frontendGRPC)
	http := net.JoinHostPort(c.hosts["temporal-frontend"].Addr.String(), frontendHTTP)
	for _, s := range temporalServices {
		host := c.hosts[s.host]
		link, err := c.Links.Add(s.host, "pg", c.primary.addr())
		if err != nil {
			return err
		}
		root := filepath.Join(c.dir, s.host)
		if err := writeServerConfig(root, host, frontend, http, link.Addr); err != nil {
			return err
		}
		argv := []string{server, "--root", root, "--config", "config", "--env", "cluster", "--allow-no-auth",
			"start", "--service", s.service}
		svc := &temporalService{service: s.service, host: host, proc: host.NewProc(s.host, c.dir, argv, nil)}
		if err := svc.proc.Start(); err != nil {
			return err
		}
		c.temporal = append(c.temporal, svc)
		// One at a time: the first to start writes the cluster's metadata,
		// and two doing it at once fail each other.
		if err := c.wait(ctx, s.host, svc.proc, listening(host, svc.readyPort())); err != nil {
			return err
		}
	}
	c.TemporalAddress, c.TemporalHTTPAddress = frontend, http
	return c.wait(ctx, "temporal", c.temporal[0].proc, func(ctx context.Context) error {
		for _, s := range c.temporal {
			if err := s.proc.Exited(); err != nil {
				return err
			}
		}
		return devstack.EnsureNamespace(ctx, frontend, devstack.DefaultNamespace)
	})
}

// writeServerConfig writes root/config/cluster.yaml for a service on host
// and the dynamic config beside it.
func writeServerConfig(root string, host *Host, frontend, http, dbAddr string) error {
	dir := filepath.Join(root, "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cluster: temporal config: %w", err)
	}
	dynamic := filepath.Join(dir, "dynamicconfig.yaml")
	callback := fmt.Sprintf(`component.nexusoperations.callback.endpoint.template:
  - value: "http://%s/namespaces/{{.NamespaceName}}/nexus/callback"
component.callbacks.allowedAddresses:
  - value:
      - Pattern: "%s"
        AllowInsecure: true
`, http, http)
	if err := os.WriteFile(dynamic, []byte(devstack.DynamicConfigYAML()+callback), 0o644); err != nil {
		return fmt.Errorf("cluster: temporal dynamic config: %w", err)
	}
	var b strings.Builder
	err := serverConfig.Execute(&b, map[string]any{
		"Shards": devstack.ServerHistoryShards, "IP": host.Addr.String(), "Frontend": frontend,
		"DBAddr": dbAddr, "DynamicConfig": dynamic,
		"Stores": map[string]string{"default": temporalDB, "visibility": visibilityDB},
	})
	if err != nil {
		return fmt.Errorf("cluster: temporal config: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, "cluster.yaml"), []byte(b.String()), 0o644)
}
