package server

import (
	"cmp"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/deploy"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/gateway/intake"
	"github.com/agentflow/agentflow/internal/governor"
	"github.com/agentflow/agentflow/internal/guard"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/nexusdoor"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/oidcauth"
	"github.com/agentflow/agentflow/internal/reach"
	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/tools/openapitool"
)

// ConfigFromEnv reads the configuration from the environment, with defaults.
func ConfigFromEnv() (Config, error) {
	conn, err := TemporalConnection()
	if err != nil {
		return Config{}, err
	}
	c := Config{
		TemporalAddress:    cmp.Or(conn.HostPort, "127.0.0.1:7233"),
		TemporalHTTPAddr:   os.Getenv("AGENTFLOW_TEMPORAL_HTTP_ADDR"),
		Namespace:          cmp.Or(conn.Namespace, "default"),
		TemporalConnection: conn,
		TaskQueue:          cmp.Or(os.Getenv("AGENTFLOW_TASK_QUEUE"), contract.TaskQueue),
		DatabaseURL:        os.Getenv("DATABASE_URL"),
		HTTPAddr:           cmp.Or(os.Getenv("AGENTFLOW_HTTP_ADDR"), "127.0.0.1:9090"),
		Model:              llm.ConfigFromEnv(),
		Script:             os.Getenv("AGENTFLOW_SCRIPT"),
		TelegramAPI:        os.Getenv("AGENTFLOW_TELEGRAM_API"),
		Deployment:         deploy.Version{Name: os.Getenv(deploy.EnvDeploymentName), BuildID: os.Getenv(deploy.EnvBuildID)},

		TemporalCompression: os.Getenv("AGENTFLOW_TEMPORAL_COMPRESSION"),
	}
	// Each step reads the variables of one concern. They run in this
	// order, and the first variable that is wrong is the one reported.
	for _, read := range []func(*Config) error{
		switchesFromEnv, inlineLimitsFromEnv, gatewayFromEnv, httpLimitsFromEnv, requestTimeoutsFromEnv,
		memoryModelFromEnv, openAPIFromEnv, workerCapacityFromEnv, objectStoreFromEnv, toolBoundsFromEnv,
		secretsFromEnv, retentionFromEnv, modelLimitsFromEnv, childProcessesFromEnv, workerTimeoutsFromEnv,
		streamIntervalFromEnv,
	} {
		if err := read(&c); err != nil {
			return Config{}, err
		}
	}
	return c, nil
}

// switchesFromEnv reads the on/off settings: content on spans, profiles.
func switchesFromEnv(c *Config) error {
	for _, p := range []struct {
		env string
		dst *bool
	}{{"AGENTFLOW_TRACE_CONTENT", &c.TraceContent}, {"AGENTFLOW_PPROF", &c.Profiling}} {
		if v := os.Getenv(p.env); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%s=%q: want true or false", p.env, v)
			}
			*p.dst = b
		}
	}
	return nil
}

// inlineLimitsFromEnv reads the sizes above which results and tools'
// structured output are kept as blobs.
func inlineLimitsFromEnv(c *Config) error {
	for _, p := range []struct {
		env string
		dst *int
	}{{"AGENTFLOW_RESULT_INLINE_LIMIT", &c.ResultInlineLimit}, {"AGENTFLOW_TOOL_DATA_INLINE", &c.ToolDataInline}} {
		if v := os.Getenv(p.env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return fmt.Errorf("%s=%q: want a positive number of bytes", p.env, v)
			}
			*p.dst = n
		}
	}
	return nil
}

// gatewayFromEnv reads the process's roles and the gateway's listeners,
// credentials (tokens, OIDC, the chat page's dev token), browser origins,
// TLS, and where timelines link (Config.checkLinks checks those).
func gatewayFromEnv(c *Config) error {
	c.Roles = strings.Split(cmp.Or(os.Getenv("AGENTFLOW_ROLES"), RoleWorker+","+RoleGateway), ",")
	c.GRPCAddr = cmp.Or(os.Getenv("AGENTFLOW_GRPC_ADDR"), "127.0.0.1:50051")
	tokens, err := gateway.ParseTokens(os.Getenv("AGENTFLOW_TOKENS"))
	if err != nil {
		return err
	}
	c.Tokens = tokens
	if c.OIDC, err = oidcFromEnv(); err != nil {
		return err
	}
	c.HTTPAPIAddr = cmp.Or(os.Getenv("AGENTFLOW_HTTP_API_ADDR"), "127.0.0.1:8080")
	if c.CORSOrigins, err = gateway.ParseCORSOrigins(os.Getenv("AGENTFLOW_CORS_ORIGINS")); err != nil {
		return err
	}
	c.ChatDevToken = os.Getenv(EnvChatDevToken)
	c.WebUIURL, c.TraceURL = os.Getenv(EnvWebUIURL), os.Getenv(EnvTraceURL)
	c.GRPCTLS = gateway.TLSConfig{CertFile: os.Getenv("AGENTFLOW_GRPC_TLS_CERT"), KeyFile: os.Getenv("AGENTFLOW_GRPC_TLS_KEY"),
		ClientCAFile: os.Getenv("AGENTFLOW_GRPC_CLIENT_CA")}
	return nil
}

// httpLimitsFromEnv reads the gateway's bounds on a tenant's open
// streams, on an upload, and on the bytes of request bodies in flight.
func httpLimitsFromEnv(c *Config) error {
	if err := intFromEnv("AGENTFLOW_MAX_STREAMS_PER_TENANT", &c.MaxStreamsPerTenant, 1, maxStreamsPerTenant, "open streams per tenant"); err != nil {
		return err
	}
	if err := intFromEnv("AGENTFLOW_MAX_UPLOAD_BYTES", &c.MaxUploadBytes, 1, gateway.MaxUploadBytesLimit, "the largest upload in bytes"); err != nil {
		return err
	}
	if err := intFromEnv(intake.EnvClientBytes, &c.HTTPClientInflightBytes, 1, gateway.MaxInflightBytes, "bytes in flight"); err != nil {
		return err
	}
	return intFromEnv(intake.EnvTotalBytes, &c.HTTPInflightBytes, 1, gateway.MaxInflightBytes, "bytes in flight")
}

// requestTimeoutsFromEnv reads how long the HTTP API waits for a
// request's headers and body, and the operator's limits on one attempt of
// a model or a tool call.
func requestTimeoutsFromEnv(c *Config) error {
	for _, p := range []struct {
		env      string
		dst      *time.Duration
		min, max time.Duration
		want     string
	}{
		{envHTTPHeaderTimeout, &c.HTTPHeaderTimeout, time.Second, 5 * time.Minute, "30s, 1s to 5m"},
		{intake.EnvTimeout, &c.HTTPBodyTimeout, time.Second, time.Hour, "30s, 1s to 1h"},
		{"AGENTFLOW_MAX_MODEL_TIMEOUT", &c.MaxModelTimeout, time.Second, time.Hour, "30s, 1s to 1h"},
		{"AGENTFLOW_MAX_TOOL_TIMEOUT", &c.MaxToolTimeout, time.Second, time.Hour, "30s, 1s to 1h"},
	} {
		if err := durationFromEnv(p.env, p.dst, p.min, p.max, p.want); err != nil {
			return err
		}
	}
	return nil
}

// memoryModelFromEnv reads the model that embeds long-term memories.
func memoryModelFromEnv(c *Config) error {
	c.MemoryEmbeddingModel = cmp.Or(os.Getenv("AGENTFLOW_MEMORY_EMBEDDING_MODEL"), DefaultMemoryEmbeddingModel)
	if _, _, err := agent.ParseModel(c.MemoryEmbeddingModel); err != nil {
		return fmt.Errorf("AGENTFLOW_MEMORY_EMBEDDING_MODEL=%q: %w", c.MemoryEmbeddingModel, err)
	}
	return nil
}

// openAPIFromEnv reads the largest API document an openapi_action entry
// may name.
func openAPIFromEnv(c *Config) error {
	return intFromEnv(openapitool.EnvMaxSpecBytes, &c.OpenAPIMaxSpecBytes, 1, openapitool.MaxSpecBytes, "the largest API document in bytes")
}

// workerCapacityFromEnv reads the worker's pollers and how many
// workflows it keeps in memory between their tasks.
func workerCapacityFromEnv(c *Config) error {
	if err := intFromEnv("AGENTFLOW_WORKFLOW_POLLERS", &c.WorkflowPollers, minPollers, maxPollers, "a number of pollers"); err != nil {
		return err
	}
	if err := intFromEnv("AGENTFLOW_ACTIVITY_POLLERS", &c.ActivityPollers, minPollers, maxPollers, "a number of pollers"); err != nil {
		return err
	}
	return intFromEnv("AGENTFLOW_WORKFLOW_CACHE_SIZE", &c.WorkflowCacheSize, minWorkflowCache, maxWorkflowCache, "a number of workflows")
}

// objectStoreFromEnv reads the object store's settings (AGENTFLOW_S3_*).
func objectStoreFromEnv(c *Config) error {
	var err error
	c.ObjectStore, err = objstore.ConfigFromEnv()
	return err
}

// toolBoundsFromEnv reads what the operator lets tools do whatever a
// catalog says: the commands stdio MCP servers may run, what the egress
// policy opens, and the platform's addresses it closes.
func toolBoundsFromEnv(c *Config) error {
	for _, cmd := range strings.Split(os.Getenv("AGENTFLOW_MCP_COMMANDS"), ",") {
		if cmd = strings.TrimSpace(cmd); cmd != "" {
			c.MCPCommands = append(c.MCPCommands, cmd)
		}
	}
	var err error
	if c.EgressAllow, err = egress.ParseAllow(os.Getenv(egress.EnvAllow)); err != nil {
		return err
	}
	if c.PlatformAddrs, err = egress.ParsePlatformAddrs(os.Getenv(egress.EnvPlatformAddrs)); err != nil {
		return err
	}
	if c.TemporalAllow, err = reach.Parse(os.Getenv(reach.EnvAllow)); err != nil {
		return fmt.Errorf("%s: %w", reach.EnvAllow, err)
	}
	var roles []string
	for _, r := range gateway.AllRoles() {
		roles = append(roles, string(r))
	}
	c.NexusBindings, err = nexusdoor.ParseBindings(os.Getenv(nexusdoor.EnvBindings), roles)
	return err
}

// secretsFromEnv reads which secrets each tenant may name, and the
// operator's vault key.
func secretsFromEnv(c *Config) error {
	var err error
	if c.SecretGrants, err = secrets.ParseGrants(os.Getenv(secrets.EnvGrants)); err != nil {
		return err
	}
	if v := os.Getenv(EnvVaultKey); v != "" {
		if c.VaultKey, err = guard.ParseKey(v); err != nil {
			return fmt.Errorf("%s: %w", EnvVaultKey, err)
		}
	}
	return nil
}

// modelLimitsFromEnv reads the providers' limits the fleet's model calls
// are held to.
func modelLimitsFromEnv(c *Config) error {
	var err error
	c.ModelLimits, err = governor.ParseLimits(os.Getenv(governor.EnvLimits))
	return err
}

// childProcessesFromEnv reads the bounds of the child processes of jq
// and of code mode: MiB each, and how many at once.
func childProcessesFromEnv(c *Config) error {
	for _, p := range []struct {
		env, want string
		lo, hi    int
		set       func(int)
	}{
		{"AGENTFLOW_JQ_MEMORY_MB", "MiB per jq program", 16, 4096, func(n int) { c.JQMemory = int64(n) << 20 }},
		{"AGENTFLOW_JQ_PROGRAMS", "jq programs at once", 1, 64, func(n int) { c.JQPrograms = n }},
		{"AGENTFLOW_PROGRAM_MEMORY_MB", "MiB per code-mode program", 16, 4096, func(n int) { c.ProgramMemory = int64(n) << 20 }},
		{"AGENTFLOW_PROGRAMS", "code-mode programs at once", 1, 64, func(n int) { c.Programs = n }},
	} {
		v := os.Getenv(p.env)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < p.lo || n > p.hi {
			return fmt.Errorf("%s=%q: want %s, %d to %d", p.env, v, p.want, p.lo, p.hi)
		}
		p.set(n)
	}
	return nil
}

// workerTimeoutsFromEnv reads how long a stopping worker lets its
// activities finish, and how long a workflow task may run before the SDK
// takes it for a deadlock.
func workerTimeoutsFromEnv(c *Config) error {
	if err := durationFromEnv("AGENTFLOW_STOP_TIMEOUT", &c.StopTimeout, minStopTimeout, maxStopTimeout, "30s or 2m, 1s to 1h"); err != nil {
		return err
	}
	return durationFromEnv("AGENTFLOW_DEADLOCK_DETECTION_TIMEOUT", &c.DeadlockDetectionTimeout, time.Second, time.Minute, "1s or 5s, 1s to 1m")
}

// streamIntervalFromEnv reads the time between token batches; Validate
// checks its bounds.
func streamIntervalFromEnv(c *Config) error {
	if v := os.Getenv("AGENTFLOW_STREAM_INTERVAL_MS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("AGENTFLOW_STREAM_INTERVAL_MS=%q: want milliseconds, 100 to 250", v)
		}
		c.StreamInterval = time.Duration(n) * time.Millisecond
	}
	return nil
}

// oidcFromEnv reads the OIDC settings: nil when AGENTFLOW_OIDC_ISSUER is
// not set, and an error when another of them is without it.
func oidcFromEnv() (*oidcauth.Config, error) {
	issuer := os.Getenv(oidcauth.EnvIssuer)
	if issuer == "" {
		for _, env := range []string{oidcauth.EnvAudience, oidcauth.EnvClaims, oidcauth.EnvTenant, oidcauth.EnvRoles} {
			if os.Getenv(env) != "" {
				return nil, fmt.Errorf("%s is set but %s is not: set the issuer, or unset %s", env, oidcauth.EnvIssuer, env)
			}
		}
		return nil, nil
	}
	claims, err := oidcauth.ParseClaims(os.Getenv(oidcauth.EnvClaims))
	if err != nil {
		return nil, err
	}
	roles, err := oidcauth.ParseRoleMap(os.Getenv(oidcauth.EnvRoles))
	if err != nil {
		return nil, err
	}
	return &oidcauth.Config{Issuer: issuer, Audience: os.Getenv(oidcauth.EnvAudience), Claims: claims,
		Tenant: os.Getenv(oidcauth.EnvTenant), Roles: roles}, nil
}

// intFromEnv reads env, when it is set, into dst: a whole number from lo
// to hi, or an error that says it wants what, lo to hi.
func intFromEnv[T int | int64](env string, dst *T, lo, hi T, what string) error {
	v := os.Getenv(env)
	if v == "" {
		return nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < int64(lo) || n > int64(hi) {
		return fmt.Errorf("%s=%q: want %s, %d to %d", env, v, what, lo, hi)
	}
	*dst = T(n)
	return nil
}

// durationFromEnv reads env, when it is set, into dst: a duration from
// lo to hi, or an error that asks for a duration such as example (which
// says the bounds too).
func durationFromEnv(env string, dst *time.Duration, lo, hi time.Duration, example string) error {
	v := os.Getenv(env)
	if v == "" {
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < lo || d > hi {
		return fmt.Errorf("%s=%q: want a duration such as %s", env, v, example)
	}
	*dst = d
	return nil
}
