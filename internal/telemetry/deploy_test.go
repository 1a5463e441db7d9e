package telemetry

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

type composeFile struct {
	Services map[string]struct {
		Build       any               `yaml:"build"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
		Ports       []string          `yaml:"ports"`
	} `yaml:"services"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, v), path)
}

// TestComposeTracing keeps deploy/compose.tracing.yml in step with
// docker-compose.yml and the collector's configuration: every agentflow
// process of the stack exports to the collector's OTLP/gRPC receiver, the
// collector mounts its configuration from the repository and sends to
// Jaeger's OTLP port.
func TestComposeTracing(t *testing.T) {
	root := filepath.Join("..", "..")
	var base, tracing composeFile
	readYAML(t, filepath.Join(root, "docker-compose.yml"), &base)
	readYAML(t, filepath.Join(root, "deploy", "compose.tracing.yml"), &tracing)

	col, ok := tracing.Services["otel-collector"]
	require.True(t, ok, "no otel-collector service")
	require.Contains(t, col.Ports, "4317:4317")
	require.Len(t, col.Volumes, 1)
	src, dst, _ := strings.Cut(strings.TrimSuffix(col.Volumes[0], ":ro"), ":")
	require.FileExists(t, filepath.Join(root, src), "compose resolves paths from the first file's folder, the repository root")
	require.Equal(t, "/etc/otelcol/config.yaml", dst)
	_, ok = tracing.Services["jaeger"]
	require.True(t, ok, "no jaeger service")

	var processes []string
	for name, s := range base.Services {
		if s.Build != nil && s.Environment["AGENTFLOW_ROLES"] != "" {
			processes = append(processes, name)
		}
	}
	require.NotEmpty(t, processes)
	for _, name := range processes {
		env := tracing.Services[name].Environment
		u, err := url.Parse(env["OTEL_EXPORTER_OTLP_ENDPOINT"])
		require.NoError(t, err, name)
		require.Equal(t, "otel-collector:4317", u.Host, "%s does not export to the collector", name)
		on, err := enabled(func(k string) string { return env[k] })
		require.NoError(t, err, name)
		require.True(t, on, name)
	}

	var cfg struct {
		Receivers struct {
			OTLP struct {
				Protocols struct {
					GRPC struct {
						Endpoint string `yaml:"endpoint"`
					} `yaml:"grpc"`
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
	readYAML(t, filepath.Join(root, src), &cfg)
	require.Equal(t, "0.0.0.0:4317", cfg.Receivers.OTLP.Protocols.GRPC.Endpoint)
	traces := cfg.Service.Pipelines["traces"]
	require.Equal(t, []string{"otlp"}, traces.Receivers)
	require.Equal(t, []string{"otlp/jaeger"}, traces.Exporters)
	require.Equal(t, "jaeger:4317", cfg.Exporters["otlp/jaeger"].Endpoint)
}
