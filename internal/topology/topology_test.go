package topology

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"gopkg.in/yaml.v3"

	"github.com/agentflow/agentflow/internal/catalog"
	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/tools"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

const testCatalog = `
tenant: acme
default_agent: calc
tools:
  - name: calculator
    kind: calculator
    description: Evaluates an arithmetic expression exactly.
agents:
  - id: calc
    description: Does arithmetic.
    model: openai:gpt-4o-mini
    system_prompt: Call the calculator for any arithmetic.
    tools: [calculator]
`

// TestTopology runs two workers and a gateway on the real Temporal server,
// streams a turn through the gateway, kills one worker, and streams
// another: the surviving worker runs it.
func TestTopology(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := topologyDir(t)

	top, err := Start(ctx, Options{
		Dir: dir, TemporalPort: -1, Logger: zaptest.NewLogger(t),
		Env: []string{"AGENTFLOW_SCRIPT=demo", "AGENTFLOW_TOKENS=tok=acme:user+approver+admin:ops", "AGENTFLOW_LOG_LEVEL=info"},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, top.Stop()) })
	require.Len(t, top.Workers, 2)
	require.Len(t, top.Gateways, 1)

	conn, err := grpc.NewClient(top.Gateways[0].GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tok")
	_, err = pb.NewCatalogServiceClient(conn).UpsertCatalog(ctx, &pb.UpsertCatalogRequest{Files: map[string]string{"acme.yaml": testCatalog}})
	require.NoError(t, err)

	// The gateway knows the platform's ports it does not listen on itself:
	// the server's HTTP API and the other processes'.
	for addr, what := range map[string]string{
		top.Stack.TemporalHTTPAddress: "the Temporal frontend's HTTP API",
		top.Workers[1].HTTPAddr:       "a platform address",
	} {
		doc := "tenant: acme\negress: [\"" + addr + "\"]\n"
		_, err := pb.NewCatalogServiceClient(conn).UpsertCatalog(ctx, &pb.UpsertCatalogRequest{Files: map[string]string{"acme.yaml": doc}})
		require.ErrorContains(t, err, `egress entry "`+addr+`": 127.0.0.1 is a loopback address and port`)
		require.ErrorContains(t, err, "is "+what+"; the platform's own ports stay closed")
	}

	turn := func(jobID string) string {
		t.Helper()
		st, err := pb.NewAgentServiceClient(conn).Stream(ctx, &pb.StreamRequest{Turn: &pb.TurnRequest{JobId: jobID, Prompt: "What is 12*7?"}})
		require.NoError(t, err)
		var want int64 = 1
		var answer string
		for {
			ev, err := st.Recv()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			require.Equal(t, want, ev.GetMeta().GetEventIndex(), "events in order without gaps")
			want++
			if c := ev.GetContent(); c != nil {
				answer += c.GetBlockJson()
			}
			if s := ev.GetStatus(); s != nil && s.GetStatus() == pb.Status_STATUS_FAILED {
				t.Fatalf("turn failed: %v", ev)
			}
		}
		return answer
	}
	require.Contains(t, turn("topology-1"), "84")
	require.NoError(t, top.Workers[0].Kill())
	require.False(t, top.Workers[0].Running())
	require.Contains(t, turn("topology-2"), "84")
	// Its port taken meanwhile (another process's connection, on a busy
	// machine), it is started again until the port is free.
	require.NoError(t, top.Workers[0].Kill())
	held, err := net.Listen("tcp", top.Workers[0].HTTPAddr)
	require.NoError(t, err)
	go func() { time.Sleep(2 * time.Second); held.Close() }()
	require.NoError(t, top.Workers[0].Start(ctx), "a killed worker starts again, once its port is free")
	log, err := os.ReadFile(top.Workers[0].Log)
	require.NoError(t, err)
	require.Contains(t, string(log), "address already in use")
}

// topologyDir is a topology's directory, removed at the test's end, with
// the processes' logs printed when the test failed. Not t.TempDir: the
// postgres user must reach it.
func topologyDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "topology-test-*")
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range []string{"gateway-1.log", "worker-1.log", "worker-2.log"} {
				b, _ := os.ReadFile(filepath.Join(dir, name))
				t.Logf("%s:\n%s", name, b)
			}
		}
		_ = os.RemoveAll(dir)
	})
	return dir
}

// TestComposeInStep compares docker-compose.yml with what Start runs: the
// processes and their roles, the settings each role is given, the server's
// version and its history shards.
func TestComposeInStep(t *testing.T) {
	root, err := devstack.RepoRoot()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	require.NoError(t, err)
	var compose struct {
		Services map[string]struct {
			Image       string            `yaml:"image"`
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(data, &compose))

	roles := map[string][]string{}
	for name, svc := range compose.Services {
		if role := svc.Environment["AGENTFLOW_ROLES"]; role != "" {
			roles[role] = append(roles[role], name)
		}
	}
	var opts Options
	opts.defaults()
	require.Len(t, roles[RoleWorker], opts.Workers, "worker services")
	require.Len(t, roles[RoleGateway], opts.Gateways, "gateway services")

	// Every setting Start gives a process of a role is set in compose too.
	for role, names := range roles {
		p, err := newProcess("probe", role, "", t.TempDir(), []string{"DATABASE_URL=x", "TEMPORAL_ADDRESS=x", "AGENTFLOW_TEMPORAL_HTTP_ADDR=x", "TEMPORAL_NAMESPACE=default"}, nil)
		require.NoError(t, err)
		for _, kv := range p.env {
			key, _, _ := strings.Cut(kv, "=")
			if key == "TEMPORAL_NAMESPACE" {
				continue // compose uses the default namespace, as Start does
			}
			for _, name := range names {
				require.Contains(t, compose.Services[name].Environment, key, "%s in service %s", key, name)
			}
		}
	}

	temporal := compose.Services["temporal"]
	require.Equal(t, strconv.Itoa(devstack.ServerHistoryShards), temporal.Environment["NUM_HISTORY_SHARDS"])
	mod, err := os.ReadFile(filepath.Join(root, "tools", "go.mod"))
	require.NoError(t, err)
	m := regexp.MustCompile(`go\.temporal\.io/server v(\d+\.\d+)\.\d+`).FindSubmatch(mod)
	require.NotNil(t, m, "tools/go.mod pins go.temporal.io/server")
	require.True(t, strings.HasSuffix(temporal.Image, ":"+string(m[1])), "compose runs server %s, tools/go.mod builds %s", temporal.Image, m[1])
}

// TestObservabilityComposeInStep checks docker-compose.observability.yml
// against docker-compose.yml: every agentflow process exports its traces
// to the collector's OTLP receiver, the collector sends them on to Jaeger,
// and Prometheus scrapes each process's /metrics, and only those.
func TestObservabilityComposeInStep(t *testing.T) {
	root, err := devstack.RepoRoot()
	require.NoError(t, err)
	type service struct {
		Image       string            `yaml:"image"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
	}
	var base, extra struct {
		Services map[string]service `yaml:"services"`
	}
	read := func(name string, v any) {
		data, err := os.ReadFile(filepath.Join(root, name))
		require.NoError(t, err)
		require.NoError(t, yaml.Unmarshal(data, v), name)
	}
	read("docker-compose.yml", &base)
	read("docker-compose.observability.yml", &extra)

	// The files the services mount are the repository's.
	for name, svc := range extra.Services {
		for _, v := range svc.Volumes {
			src, _, _ := strings.Cut(v, ":")
			require.FileExists(t, filepath.Join(root, src), "volume of %s", name)
		}
	}

	var collector struct {
		Receivers struct {
			OTLP struct {
				Protocols map[string]struct {
					Endpoint string `yaml:"endpoint"`
				} `yaml:"protocols"`
			} `yaml:"otlp"`
		} `yaml:"receivers"`
		Exporters map[string]struct {
			Endpoint string `yaml:"endpoint"`
		} `yaml:"exporters"`
		Service struct {
			Pipelines map[string]struct {
				Receivers []string `yaml:"receivers"`
				Exporters []string `yaml:"exporters"`
			} `yaml:"pipelines"`
		} `yaml:"service"`
	}
	read("deploy/otel-collector.yaml", &collector)
	grpc := collector.Receivers.OTLP.Protocols["grpc"].Endpoint
	_, grpcPort, err := net.SplitHostPort(grpc)
	require.NoError(t, err, "the collector's OTLP gRPC receiver")
	traces := collector.Service.Pipelines["traces"]
	require.Equal(t, []string{"otlp"}, traces.Receivers)
	require.Len(t, traces.Exporters, 1)
	host, _, err := net.SplitHostPort(collector.Exporters[traces.Exporters[0]].Endpoint)
	require.NoError(t, err)
	require.Contains(t, extra.Services, host, "the collector exports traces to a service of the file")
	require.Contains(t, extra.Services[host].Image, "jaeger")

	var targets []string
	for name, svc := range base.Services {
		if svc.Environment["AGENTFLOW_ROLES"] == "" {
			continue
		}
		env := extra.Services[name].Environment
		require.Equal(t, "http://otel-collector:"+grpcPort, env["OTEL_EXPORTER_OTLP_ENDPOINT"], "service %s", name)
		require.Equal(t, "agentflow-"+svc.Environment["AGENTFLOW_ROLES"], env["OTEL_SERVICE_NAME"], "service %s", name)
		_, port, err := net.SplitHostPort(svc.Environment["AGENTFLOW_HTTP_ADDR"])
		require.NoError(t, err, "AGENTFLOW_HTTP_ADDR of %s", name)
		targets = append(targets, net.JoinHostPort(name, port))
	}
	require.Contains(t, extra.Services, "otel-collector")

	var prom struct {
		ScrapeConfigs []struct {
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	read("deploy/prometheus.yml", &prom)
	var scraped []string
	for _, sc := range prom.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			scraped = append(scraped, st.Targets...)
		}
	}
	require.ElementsMatch(t, targets, scraped)
}

// TestComposeOpensSampleCatalog: every agentflow process of
// docker-compose.yml runs under one egress policy by default, and it
// opens what the sample catalog (which the catalog service applies) lists.
func TestComposeOpensSampleCatalog(t *testing.T) {
	root, err := devstack.RepoRoot()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	require.NoError(t, err)
	var compose struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(data, &compose))
	defaultOf := regexp.MustCompile(`^\$\{[A-Z_]+:-(.*)\}$`)
	allow := map[string]bool{}
	for name, svc := range compose.Services {
		if svc.Environment["AGENTFLOW_ROLES"] == "" {
			continue
		}
		m := defaultOf.FindStringSubmatch(svc.Environment[egress.EnvAllow])
		require.NotNil(t, m, "%s of service %s", egress.EnvAllow, name)
		allow[m[1]] = true
	}
	require.Len(t, allow, 1, "one policy for every process: %v", allow)
	for value := range allow {
		entries, err := egress.ParseAllow(value)
		require.NoError(t, err)
		op, err := egress.OpenOperator(entries...)
		require.NoError(t, err)
		kinds, err := tools.NewRegistry(tools.Deps{Egress: op}, tools.Builtin()...)
		require.NoError(t, err)
		_, err = catalog.LoadFiles(kinds, filepath.Join(root, "catalog"))
		require.NoError(t, err)
	}
}
