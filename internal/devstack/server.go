package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The real server's databases on the stack's Postgres, named as the
// server's own docker setup names them.
const (
	serverDatabase           = "temporal"
	serverVisibilityDatabase = "temporal_visibility"
	// serverRetention is the default namespace's retention, as the
	// server's auto-setup image gives it.
	serverRetention = 24 * time.Hour
	// ServerHistoryShards matches the auto-setup image's default, and
	// docker-compose.yml sets it.
	ServerHistoryShards = 4
)

// startServer runs the real Temporal server (go.temporal.io/server, the
// version pinned by tools/go.mod) on the stack's Postgres: it creates and
// migrates the server's two databases with the server's SQL tool, writes a
// config for the four services in one process, starts it, and registers
// the namespace and agentflow's search attributes.
func (s *Stack) startServer(ctx context.Context, bins serverBinaries, opts Options) error {
	begin := time.Now()
	sv, err := s.claimTemporal(ctx, "temporal server", "temporal-server.log")
	if err != nil {
		return err
	}

	db, err := pgconn.ParseConfig(s.DatabaseURL)
	if err != nil {
		return fmt.Errorf("temporal server: parse database url: %w", err)
	}
	if err := s.migrateServer(ctx, bins.sqlTool, db); err != nil {
		return err
	}

	err = s.startOnFreePorts(sv, opts, func(attempt int) error {
		if attempt > 1 {
			// The ports the last try was given are free again now that it
			// has exited: only forgetting them gives this one others.
			if err := os.Remove(portsFile(serverRoot(s.Dir))); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("temporal server ports: %w", err)
			}
		}
		return s.runServer(ctx, sv, bins, opts, db)
	})
	if err != nil {
		return err
	}
	s.log.Info("temporal server started", zap.String("address", s.TemporalAddress), zap.String("namespace", s.Namespace),
		zap.Duration("took", time.Since(begin)))
	return nil
}

// runServer starts one server process for sv and waits until it is ready,
// setting the stack's addresses. The ports of the services other than the
// frontend are the ones of the last start while they are free, else new.
func (s *Stack) runServer(ctx context.Context, sv *service, bins serverBinaries, opts Options, db *pgconn.Config) error {
	port, err := temporalPort(opts)
	if err != nil {
		return err
	}
	if opts.TemporalPort != -1 {
		if err := portHeld(port, "Temporal"); err != nil {
			return err
		}
	}
	root := serverRoot(s.Dir)
	services, err := writeServerConfig(root, port, db)
	if err != nil {
		return err
	}
	httpPort := services[0].HTTP
	sv.named = nil
	for _, svc := range services {
		for _, l := range []struct {
			port int
			what string
		}{{svc.GRPC, "gRPC API"}, {svc.HTTP, "HTTP API"}, {svc.Membership, "membership port"}} {
			if l.port != 0 {
				sv.named = append(sv.named, Listener{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(l.port)),
					What: fmt.Sprintf("the Temporal %s's %s", svc.Name, l.what)})
			}
		}
	}
	sv.argv = []string{bins.server, "--root", root, "--config", "config", "--env", "devstack", "--allow-no-auth", "start"}
	if err := sv.start(s.Dir, nil); err != nil {
		return err
	}

	address := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	waitCtx, cancel := context.WithTimeout(ctx, temporalStartTimeout)
	defer cancel()
	sv.ready = func(ctx context.Context) error { return serverReady(ctx, address, s.Namespace) }
	if err := poll(waitCtx, sv.proc, 200*time.Millisecond, sv.ready); err != nil {
		return err
	}
	s.TemporalAddress = address
	s.TemporalHTTPAddress = net.JoinHostPort("127.0.0.1", strconv.Itoa(httpPort))
	return nil
}

// migrateServer creates the server's databases unless they exist and brings
// their schemas to the server's version. The SQL tool's steps are
// idempotent, so a stack restarted on old state only checks the versions.
func (s *Stack) migrateServer(ctx context.Context, sqlTool string, db *pgconn.Config) error {
	for _, d := range []struct{ name, schema string }{
		{serverDatabase, "postgresql/v12/temporal"},
		{serverVisibilityDatabase, "postgresql/v12/visibility"},
	} {
		if _, err := s.CreateDatabase(ctx, d.name); err != nil {
			return fmt.Errorf("temporal server: %w", err)
		}
		versioned, err := hasSchemaVersion(ctx, s, d.name)
		if err != nil {
			return err
		}
		base := []string{"--plugin", "postgres12", "--endpoint", db.Host, "--port", strconv.Itoa(int(db.Port)),
			"--user", db.User, "--database", d.name}
		env := []string{"SQL_PASSWORD=" + db.Password}
		if !versioned {
			if err := runTool(ctx, sqlTool, env, append(base, "setup-schema", "-v", "0.0")...); err != nil {
				return err
			}
		}
		if err := runTool(ctx, sqlTool, env, append(base, "update-schema", "--schema-name", d.schema)...); err != nil {
			return err
		}
	}
	return nil
}

// hasSchemaVersion reports whether database name already has the SQL
// tool's version table.
func hasSchemaVersion(ctx context.Context, s *Stack, name string) (bool, error) {
	dbURL, err := s.databaseURL(name)
	if err != nil {
		return false, err
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return false, fmt.Errorf("temporal server: connect to %s: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass('schema_version') IS NOT NULL").Scan(&ok); err != nil {
		return false, fmt.Errorf("temporal server: inspect %s: %w", name, err)
	}
	return ok, nil
}

// runTool runs a short-lived program and quotes its output on failure.
func runTool(ctx context.Context, bin string, env []string, args ...string) error {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", filepath.Base(bin), strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// serverConfig is the server's static config: the four services in one
// process on 127.0.0.1, Postgres for persistence and visibility, and the
// dynamic config file written beside it.
var serverConfig = template.Must(template.New("config").Parse(`# Written by devstack at every start.
log:
  stdout: true
  level: warn
persistence:
  defaultStore: default
  visibilityStore: visibility
  numHistoryShards: {{.Shards}}
  datastores:
    default:
      sql:
        pluginName: postgres12
        databaseName: {{.Database}}
        connectAddr: "{{.DBAddr}}"
        connectProtocol: tcp
        user: "{{.DBUser}}"
        password: "{{.DBPassword}}"
        maxConns: 20
        maxIdleConns: 20
        maxConnLifetime: 1h
    visibility:
      sql:
        pluginName: postgres12
        databaseName: {{.Visibility}}
        connectAddr: "{{.DBAddr}}"
        connectProtocol: tcp
        user: "{{.DBUser}}"
        password: "{{.DBPassword}}"
        maxConns: 10
        maxIdleConns: 10
        maxConnLifetime: 1h
global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: 127.0.0.1
services:
{{- range .Services}}
  {{.Name}}:
    rpc:
      grpcPort: {{.GRPC}}
      membershipPort: {{.Membership}}
      bindOnLocalHost: true
{{- if .HTTP}}
      httpPort: {{.HTTP}}
{{- end}}
{{- end}}
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
      rpcAddress: "127.0.0.1:{{.Frontend}}"
dcRedirectionPolicy:
  policy: noop
dynamicConfigClient:
  filepath: "{{.DynamicConfig}}"
  pollInterval: 10s
`))

type serverService struct {
	Name                   string
	GRPC, Membership, HTTP int
}

// writeServerConfig writes root/config/devstack.yaml and the dynamic config
// beside it, and returns the services with their ports, the frontend
// first. Ports other than the frontend's are picked free at each start.
func writeServerConfig(root string, frontend int, db *pgconn.Config) ([]serverService, error) {
	dir := filepath.Join(root, "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("temporal server config: %w", err)
	}
	ports, err := servicePorts(portsFile(root))
	if err != nil {
		return nil, err
	}
	dynamic := filepath.Join(dir, "dynamicconfig.yaml")
	if err := os.WriteFile(dynamic, []byte(DynamicConfigYAML()+nexusCallbackYAML(ports[1])), 0o644); err != nil {
		return nil, fmt.Errorf("temporal server dynamic config: %w", err)
	}
	services := []serverService{
		{Name: "frontend", GRPC: frontend, Membership: ports[0], HTTP: ports[1]},
		{Name: "history", GRPC: ports[2], Membership: ports[3]},
		{Name: "matching", GRPC: ports[4], Membership: ports[5]},
		{Name: "worker", GRPC: ports[6], Membership: ports[7]},
	}
	data := map[string]any{
		"Shards":        ServerHistoryShards,
		"Database":      serverDatabase,
		"Visibility":    serverVisibilityDatabase,
		"DBAddr":        net.JoinHostPort(db.Host, strconv.Itoa(int(db.Port))),
		"DBUser":        db.User,
		"DBPassword":    db.Password,
		"Frontend":      frontend,
		"DynamicConfig": dynamic,
		"Services":      services,
	}
	var b strings.Builder
	if err := serverConfig.Execute(&b, data); err != nil {
		return nil, fmt.Errorf("temporal server config: %w", err)
	}
	// The password may be in it.
	if err := os.WriteFile(filepath.Join(dir, "devstack.yaml"), []byte(b.String()), 0o600); err != nil {
		return nil, fmt.Errorf("temporal server config: %w", err)
	}
	return services, nil
}

// DynamicConfigYAML renders [DynamicConfig] as a server's dynamic config
// file (the format of deploy/temporal-dynamicconfig.yaml).
func DynamicConfigYAML() string {
	var b strings.Builder
	for _, kv := range DynamicConfig() {
		key, value, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, "%s:\n  - value: %s\n", key, value)
	}
	return b.String()
}

// nexusCallbackYAML is the dynamic config a real server needs for async
// Nexus operations (the dev server sets its own): where a handler's
// namespace sends an operation's completion, the frontend's HTTP API at
// httpPort, and that address allowed as a callback's.
func nexusCallbackYAML(httpPort int) string {
	return fmt.Sprintf(`component.nexusoperations.callback.endpoint.template:
  - value: "http://127.0.0.1:%d/namespaces/{{.NamespaceName}}/nexus/callback"
component.callbacks.allowedAddresses:
  - value:
      - Pattern: "127.0.0.1:%d"
        AllowInsecure: true
`, httpPort, httpPort)
}

// EnsureNamespace registers namespace on the Temporal server at address
// unless it exists, and returns once every service of the server knows
// it (a new namespace reaches history and matching at their next cache
// refresh), or ctx ends: a second namespace, such as Nexus handlers'.
func EnsureNamespace(ctx context.Context, address, namespace string) error {
	for {
		err := serverReady(ctx, address, namespace)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %q: %w", namespace, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// serverReady registers namespace (with agentflow's search attributes) once
// the frontend answers, and reports ready when the namespace has reached
// the history and matching services too: the frontend learns of a new
// namespace at once, the other services at their next cache refresh (10 s),
// and until then they refuse its workflows.
func serverReady(ctx context.Context, address, namespace string) error {
	return withHealthy(ctx, address, namespace, 5*time.Second, func(ctx context.Context, c client.Client) error {
		_, err := c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
			Namespace:                        namespace,
			WorkflowExecutionRetentionPeriod: durationpb.New(serverRetention),
		})
		var exists *serviceerror.NamespaceAlreadyExists
		if err != nil && !errors.As(err, &exists) {
			return fmt.Errorf("register namespace: %w", err)
		}
		if err := ensureSearchAttributes(ctx, c, namespace); err != nil {
			return err
		}
		// History knows the namespace when it answers "no such workflow".
		_, err = c.WorkflowService().DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
			Namespace: namespace,
			Execution: &commonpb.WorkflowExecution{WorkflowId: "devstack-readiness-probe"},
		})
		var notFound *serviceerror.NotFound
		if !errors.As(err, &notFound) {
			return fmt.Errorf("history service not ready for namespace %q: %v", namespace, err)
		}
		_, err = c.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
			Namespace: namespace,
			TaskQueue: &taskqueuepb.TaskQueue{Name: "devstack-readiness-probe", Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
		})
		if err != nil {
			return fmt.Errorf("matching service not ready for namespace %q: %w", namespace, err)
		}
		return nil
	})
}

// ensureSearchAttributes registers agentflow's search attributes in
// namespace where they are missing — a server whose state was made by an
// older version lacks the newer ones — and reports an error until the
// frontend accepts a query that names them all.
func ensureSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	want := map[string]enumspb.IndexedValueType{}
	for _, name := range searchAttributes() {
		want[name] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
	}
	have, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes: %w", err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for name, typ := range want {
		if _, ok := have.GetCustomAttributes()[name]; !ok {
			missing[name] = typ
		}
	}
	if len(missing) > 0 {
		if _, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
			Namespace: namespace, SearchAttributes: missing,
		}); err != nil {
			return fmt.Errorf("add search attributes: %w", err)
		}
		return errors.New("search attributes added; waiting for them to apply")
	}
	// Added search attributes reach the frontend's namespace cache at its
	// next refresh; until then a start that sets them is refused. A query
	// that names them is refused the same way.
	var conds []string
	for _, name := range searchAttributes() {
		conds = append(conds, name+` = "devstack-readiness-probe"`)
	}
	if _, err := c.WorkflowService().ListWorkflowExecutions(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: namespace, PageSize: 1, Query: strings.Join(conds, " AND "),
	}); err != nil {
		return fmt.Errorf("search attributes not usable yet: %w", err)
	}
	return nil
}

// serverBinaries are the real server and its SQL tool.
type serverBinaries struct{ server, sqlTool string }

// temporalServer returns the paths of the real Temporal server and its SQL
// tool for the repository at root (<root>/.bin/temporal-server and
// temporal-sql-tool), built like [TemporalCLI] from the versions pinned in
// tools/go.mod, saying on progress, before it builds either binary, that
// it does.
func temporalServer(ctx context.Context, progress io.Writer, root string) (server, sqlTool string, err error) {
	if server, err = build(ctx, progress, root, "tools", "temporal-server", "go.temporal.io/server/cmd/server"); err != nil {
		return "", "", err
	}
	if sqlTool, err = build(ctx, progress, root, "tools", "temporal-sql-tool", "go.temporal.io/server/cmd/tools/sql"); err != nil {
		return "", "", err
	}
	return server, sqlTool, nil
}

// serverRoot is the server's folder in a stack's folder dir.
func serverRoot(dir string) string { return filepath.Join(dir, "temporal-server") }

// portsFile is where the server's ports are kept (servicePorts).
func portsFile(root string) string { return filepath.Join(root, "config", "ports") }

// servicePorts returns the eight ports of the services' gRPC and membership
// listeners other than the frontend's: those of the last start, kept in
// file, while they are free and distinct. Membership rows of the last
// start stay in the database for a while, and a server on new ports would
// wait for those peers (up to maxJoinDuration) before it serves.
func servicePorts(file string) ([]int, error) { return keptPorts(file, 8) }

// keptPorts returns n distinct free ports below 32768: those kept in file
// while they are free and distinct, else new ones, which it keeps there.
func keptPorts(file string, n int) ([]int, error) {
	var ports []int
	if b, err := os.ReadFile(file); err == nil {
		for _, f := range strings.Fields(string(b)) {
			p, err := strconv.Atoi(f)
			if err != nil || slices.Contains(ports, p) || !portFree(p) {
				ports = nil
				break
			}
			ports = append(ports, p)
		}
	}
	if len(ports) == n {
		return ports, nil
	}
	ports, err := freeSmallPorts(n)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, p := range ports {
		fmt.Fprintln(&b, p)
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		return nil, fmt.Errorf("keep ports: %w", err)
	}
	return ports, nil
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// freeSmallPorts returns n distinct free ports (freeSmallPort). Each is
// free when it is picked but not held, so the same one can come up twice.
func freeSmallPorts(n int) ([]int, error) {
	var ports []int
	for len(ports) < n {
		p, err := freeSmallPort()
		if err != nil {
			return nil, err
		}
		if !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	return ports, nil
}

// freeSmallPort returns a free TCP port on 127.0.0.1 below 32768: the
// server stores membership ports in a smallint column, and the kernel's
// ephemeral range lies above it.
func freeSmallPort() (int, error) {
	for range 100 {
		if port := 20000 + rand.IntN(12000); portFree(port) {
			return port, nil
		}
	}
	return 0, errors.New("find a free port below 32768: none after 100 tries")
}
