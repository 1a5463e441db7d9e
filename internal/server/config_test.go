package server

import (
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/docs"
	"github.com/agentflow/agentflow/internal/deploy"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/oidcauth"
)

// asGateway makes c a gateway's configuration.
func asGateway(t *testing.T, c *Config) {
	t.Helper()
	tokens, err := gateway.ParseTokens("t=demo")
	require.NoError(t, err)
	c.Roles, c.GRPCAddr, c.Tokens = []string{RoleGateway}, ":1", tokens
}

func TestValidate(t *testing.T) {
	ok := Config{DatabaseURL: "postgres://x", TemporalAddress: "t:7233", TaskQueue: "q"}
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"worker only", func(*Config) {}, ""},
		{"a script without the scripted model", func(c *Config) { c.Script = "demo" }, "AGENTFLOW_SCRIPT=demo: this worker links no scripted model"},
		{"auto without the scripted model", func(c *Config) { c.Script = "auto" }, ""},
		{"a script with the scripted model", func(c *Config) {
			c.Script, c.ScriptedModel = "demo", func(string) (io.Closer, string, error) { return nil, "", nil }
		}, ""},
		{"gateway without tokens", func(c *Config) { c.Roles = []string{RoleGateway}; c.GRPCAddr = ":1" }, "AGENTFLOW_TOKENS is empty"},
		{"gateway", func(c *Config) {
			tokens, err := gateway.ParseTokens("t=demo")
			require.NoError(t, err)
			c.Roles, c.GRPCAddr, c.Tokens = []string{RoleWorker, RoleGateway}, ":1", tokens
		}, ""},
		{"gateway with OIDC only", func(c *Config) {
			c.Roles, c.GRPCAddr = []string{RoleGateway}, ":1"
			c.OIDC = &oidcauth.Config{Issuer: "https://idp.example.com", Audience: "agentflow", Tenant: "demo"}
		}, ""},
		{"gateway with OIDC without an audience", func(c *Config) {
			c.Roles, c.GRPCAddr = []string{RoleGateway}, ":1"
			c.OIDC = &oidcauth.Config{Issuer: "https://idp.example.com", Tenant: "demo"}
		}, "AGENTFLOW_OIDC_AUDIENCE is empty"},
		{"gateway with body bounds", func(c *Config) {
			asGateway(t, c)
			c.HTTPClientInflightBytes, c.HTTPInflightBytes, c.HTTPBodyTimeout = 128<<20, 1<<30, time.Minute
		}, ""},
		{"a share per client below the largest upload", func(c *Config) {
			asGateway(t, c)
			c.MaxUploadBytes, c.HTTPClientInflightBytes = 100<<20, 64<<20
		}, "67108864 bytes in flight per client: want 104923136 (the largest body or upload) to 17179869184 (AGENTFLOW_HTTP_CLIENT_INFLIGHT_BYTES)"},
		{"a total below the share per client", func(c *Config) {
			asGateway(t, c)
			c.HTTPClientInflightBytes, c.HTTPInflightBytes = 128<<20, 100<<20
		}, "104857600 bytes in flight in all: want 134217728 (the bytes per client) to 17179869184 (AGENTFLOW_HTTP_INFLIGHT_BYTES)"},
		{"a chat dev token on a local stack", func(c *Config) {
			asGateway(t, c)
			c.HTTPAPIAddr, c.ChatDevToken = "127.0.0.1:8080", "dev-token"
		}, ""},
		{"a chat dev token on every interface", func(c *Config) {
			asGateway(t, c)
			c.HTTPAPIAddr, c.ChatDevToken = "0.0.0.0:8080", "dev-token"
		}, `AGENTFLOW_CHAT_DEV_TOKEN hands its token to anyone who opens the chat page: it is for a local stack, whose HTTP API listens on a loopback address, not on "0.0.0.0:8080"`},
		{"unknown role", func(c *Config) { c.Roles = []string{"scheduler"} }, `unknown role "scheduler"`},
		{"stream interval too short", func(c *Config) { c.StreamInterval = 50 * time.Millisecond }, "want 100ms to 250ms"},
		{"no database", func(c *Config) { c.DatabaseURL = "" }, "DATABASE_URL is not set"},
		{"pollers", func(c *Config) { c.WorkflowPollers, c.ActivityPollers = 8, 16 }, ""},
		{"one workflow poller", func(c *Config) { c.WorkflowPollers = 1 }, "1 workflow pollers: want 2 to 64 (AGENTFLOW_WORKFLOW_POLLERS)"},
		{"too many activity pollers", func(c *Config) { c.ActivityPollers = 65 }, "65 activity pollers: want 2 to 64 (AGENTFLOW_ACTIVITY_POLLERS)"},
		{"workflow cache", func(c *Config) { c.WorkflowCacheSize = 2000 }, ""},
		{"a tiny workflow cache", func(c *Config) { c.WorkflowCacheSize = 10 }, "workflow cache of 10: want 100 to 1000000 workflows (AGENTFLOW_WORKFLOW_CACHE_SIZE)"},
		{"mcp commands", func(c *Config) { c.MCPCommands = []string{"mcp-server-files", "/opt/mcp/bin/server"} }, ""},
		{"a relative mcp command", func(c *Config) { c.MCPCommands = []string{"bin/server"} }, `AGENTFLOW_MCP_COMMANDS: "bin/server": give an executable's name (looked up in PATH) or an absolute path`},
		{"an unclean mcp command", func(c *Config) { c.MCPCommands = []string{"/opt//server"} }, `AGENTFLOW_MCP_COMMANDS: "/opt//server": write the path clean`},
		{"stop timeout", func(c *Config) { c.StopTimeout = 2 * time.Minute }, ""},
		{"a stop timeout of a millisecond", func(c *Config) { c.StopTimeout = time.Millisecond }, "stop timeout 1ms: want 1s to 1h (AGENTFLOW_STOP_TIMEOUT)"},
		{"a model timeout limit", func(c *Config) { c.MaxModelTimeout = time.Minute }, ""},
		{"a model timeout limit of two hours", func(c *Config) { c.MaxModelTimeout = 2 * time.Hour }, "a model timeout limit of 2h0m0s: want 1s to 1h (AGENTFLOW_MAX_MODEL_TIMEOUT)"},
		{"a versioned worker", func(c *Config) { c.Deployment = deploy.Version{Name: "agentflow", BuildID: "v2"} }, ""},
		{"a build without its deployment", func(c *Config) { c.Deployment = deploy.Version{BuildID: "v2"} },
			"AGENTFLOW_BUILD_ID is set but AGENTFLOW_DEPLOYMENT_NAME is not: a versioned worker names its deployment and its build"},
		{"a deployment without a build", func(c *Config) { c.Deployment = deploy.Version{Name: "agentflow"} },
			"AGENTFLOW_DEPLOYMENT_NAME is set but AGENTFLOW_BUILD_ID is not"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.mutate(&c)
			err := c.Validate()
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestConfigFromEnvWorkflowCache(t *testing.T) {
	t.Setenv("AGENTFLOW_WORKFLOW_CACHE_SIZE", "2000")
	c, err := ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, 2000, c.WorkflowCacheSize)
	for _, bad := range []string{"x", "99", "1000001"} {
		t.Setenv("AGENTFLOW_WORKFLOW_CACHE_SIZE", bad)
		_, err := ConfigFromEnv()
		require.ErrorContains(t, err, "AGENTFLOW_WORKFLOW_CACHE_SIZE="+strconv.Quote(bad)+": want a number of workflows, 100 to 1000000")
	}
}

func TestConfigFromEnvMemoryEmbeddingModel(t *testing.T) {
	c, err := ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, DefaultMemoryEmbeddingModel, c.MemoryEmbeddingModel)
	t.Setenv("AGENTFLOW_MEMORY_EMBEDDING_MODEL", "ollama:nomic-embed-text")
	c, err = ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, "ollama:nomic-embed-text", c.MemoryEmbeddingModel)
	t.Setenv("AGENTFLOW_MEMORY_EMBEDDING_MODEL", "text-embedding-3-small")
	_, err = ConfigFromEnv()
	require.ErrorContains(t, err, `AGENTFLOW_MEMORY_EMBEDDING_MODEL="text-embedding-3-small"`)
}

func TestConfigFromEnvModelLimits(t *testing.T) {
	t.Setenv("AGENTFLOW_MODEL_LIMITS", "openai=requests:500/1m,concurrent:8;anthropic:claude-sonnet-4-5=output_tokens:8000")
	c, err := ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, []string{"anthropic:claude-sonnet-4-5", "openai"}, c.ModelLimits.Keys())
	for bad, want := range map[string]string{
		"openai=requests:0":  `AGENTFLOW_MODEL_LIMITS: key "openai": limit "requests": count "0": want a whole number from 1`,
		"openai=rpm:10":      `AGENTFLOW_MODEL_LIMITS: key "openai": unknown limit "rpm"`,
		"openai:requests:10": `AGENTFLOW_MODEL_LIMITS: entry "openai:requests:10": want <provider>[:<model>]=<limit>`,
	} {
		t.Setenv("AGENTFLOW_MODEL_LIMITS", bad)
		_, err := ConfigFromEnv()
		require.ErrorContains(t, err, want)
	}
}

func TestConfigFromEnvPollers(t *testing.T) {
	t.Setenv("AGENTFLOW_WORKFLOW_POLLERS", "6")
	t.Setenv("AGENTFLOW_ACTIVITY_POLLERS", "12")
	c, err := ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, 6, c.WorkflowPollers)
	require.Equal(t, 12, c.ActivityPollers)

	for _, bad := range []string{"x", "1", "65"} {
		t.Setenv("AGENTFLOW_ACTIVITY_POLLERS", bad)
		_, err := ConfigFromEnv()
		require.ErrorContains(t, err, `AGENTFLOW_ACTIVITY_POLLERS="`+bad+`": want a number of pollers, 2 to 64`)
	}
}

func TestConfigFromEnvMCPCommands(t *testing.T) {
	c, err := ConfigFromEnv()
	require.NoError(t, err)
	require.Empty(t, c.MCPCommands, "none by default")
	t.Setenv("AGENTFLOW_MCP_COMMANDS", " mcp-server-files, /opt/mcp/bin/server ,,")
	c, err = ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, []string{"mcp-server-files", "/opt/mcp/bin/server"}, c.MCPCommands)
}

func TestConfigFromEnvSizes(t *testing.T) {
	t.Setenv("AGENTFLOW_TOOL_DATA_INLINE", "4096")
	t.Setenv("AGENTFLOW_RESULT_INLINE_LIMIT", "1048576")
	c, err := ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, 4096, c.ToolDataInline)
	require.Equal(t, 1<<20, c.ResultInlineLimit)

	for _, bad := range []string{"x", "0", "-5"} {
		t.Setenv("AGENTFLOW_TOOL_DATA_INLINE", bad)
		_, err := ConfigFromEnv()
		require.EqualError(t, err, `AGENTFLOW_TOOL_DATA_INLINE="`+bad+`": want a positive number of bytes`)
	}
}

func TestConfigFromEnvTraceContent(t *testing.T) {
	for _, tc := range []struct {
		env     string
		want    bool
		wantErr string
	}{
		{"", false, ""},
		{"true", true, ""},
		{"false", false, ""},
		{"yes", false, `AGENTFLOW_TRACE_CONTENT="yes": want true or false`},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv("AGENTFLOW_TRACE_CONTENT", tc.env)
			c, err := ConfigFromEnv()
			if tc.wantErr != "" {
				require.EqualError(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, c.TraceContent)
		})
	}
}

func TestConfigFromEnvSecretGrants(t *testing.T) {
	t.Setenv("AGENTFLOW_SECRETS", "")
	c, err := ConfigFromEnv()
	require.NoError(t, err)
	require.Error(t, c.SecretGrants.Allows("demo", "env:FLIGHTS_TOKEN"), "by default no tenant may name a secret")

	t.Setenv("AGENTFLOW_SECRETS", "demo=env:FLIGHTS_TOKEN+env:CRM_*, *=env:SHARED_KEY")
	c, err = ConfigFromEnv()
	require.NoError(t, err)
	require.NoError(t, c.SecretGrants.Allows("demo", "env:CRM_KEY"))
	require.NoError(t, c.SecretGrants.Allows("acme", "env:SHARED_KEY"))
	require.Error(t, c.SecretGrants.Allows("acme", "env:FLIGHTS_TOKEN"))

	t.Setenv("AGENTFLOW_SECRETS", "demo")
	_, err = ConfigFromEnv()
	require.ErrorContains(t, err, `AGENTFLOW_SECRETS: entry "demo": want <tenant>=<reference>`)
}

func TestConfigFromEnvJQ(t *testing.T) {
	t.Setenv("AGENTFLOW_JQ_MEMORY_MB", "")
	t.Setenv("AGENTFLOW_JQ_PROGRAMS", "")
	c, err := ConfigFromEnv()
	require.NoError(t, err)
	require.Zero(t, c.JQMemory, "jqproc's default")
	require.Zero(t, c.JQPrograms, "jqproc's default")

	t.Setenv("AGENTFLOW_JQ_MEMORY_MB", "512")
	t.Setenv("AGENTFLOW_JQ_PROGRAMS", "2")
	c, err = ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, int64(512<<20), c.JQMemory)
	require.Equal(t, 2, c.JQPrograms)

	for _, tt := range []struct{ name, value, want string }{
		{"AGENTFLOW_JQ_MEMORY_MB", "8", `AGENTFLOW_JQ_MEMORY_MB="8": want MiB per jq program, 16 to 4096`},
		{"AGENTFLOW_JQ_MEMORY_MB", "lots", `AGENTFLOW_JQ_MEMORY_MB="lots": want MiB per jq program, 16 to 4096`},
		{"AGENTFLOW_JQ_PROGRAMS", "0", `AGENTFLOW_JQ_PROGRAMS="0": want jq programs at once, 1 to 64`},
	} {
		t.Setenv("AGENTFLOW_JQ_MEMORY_MB", "")
		t.Setenv("AGENTFLOW_JQ_PROGRAMS", "")
		t.Setenv(tt.name, tt.value)
		_, err := ConfigFromEnv()
		require.EqualError(t, err, tt.want)
	}
}

func TestConfigFromEnvPrograms(t *testing.T) {
	t.Setenv("AGENTFLOW_PROGRAM_MEMORY_MB", "")
	t.Setenv("AGENTFLOW_PROGRAMS", "")
	c, err := ConfigFromEnv()
	require.NoError(t, err)
	require.Zero(t, c.ProgramMemory, "program's default")
	require.Zero(t, c.Programs, "program's default")

	t.Setenv("AGENTFLOW_PROGRAM_MEMORY_MB", "128")
	t.Setenv("AGENTFLOW_PROGRAMS", "8")
	c, err = ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, int64(128<<20), c.ProgramMemory)
	require.Equal(t, 8, c.Programs)

	for _, tt := range []struct{ name, value, want string }{
		{"AGENTFLOW_PROGRAM_MEMORY_MB", "8", `AGENTFLOW_PROGRAM_MEMORY_MB="8": want MiB per code-mode program, 16 to 4096`},
		{"AGENTFLOW_PROGRAMS", "65", `AGENTFLOW_PROGRAMS="65": want code-mode programs at once, 1 to 64`},
	} {
		t.Setenv("AGENTFLOW_PROGRAM_MEMORY_MB", "")
		t.Setenv("AGENTFLOW_PROGRAMS", "")
		t.Setenv(tt.name, tt.value)
		_, err := ConfigFromEnv()
		require.EqualError(t, err, tt.want)
	}
}

func TestConfigFromEnvHTTPAPI(t *testing.T) {
	c, err := ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:8080", c.HTTPAPIAddr, "the local default")
	require.Empty(t, c.CORSOrigins, "no origin is allowed by default")

	t.Setenv("AGENTFLOW_HTTP_API_ADDR", "off")
	t.Setenv("AGENTFLOW_CORS_ORIGINS", "http://localhost:3000, https://app.example.com/")
	c, err = ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, "off", c.HTTPAPIAddr)
	require.Equal(t, []string{"http://localhost:3000", "https://app.example.com"}, c.CORSOrigins)

	t.Setenv("AGENTFLOW_CORS_ORIGINS", "*")
	_, err = ConfigFromEnv()
	require.ErrorContains(t, err, `AGENTFLOW_CORS_ORIGINS entry "*": name each origin`)

	t.Setenv("AGENTFLOW_CORS_ORIGINS", "")
	require.Empty(t, c.ChatDevToken, "the chat page offers no token by default")
	t.Setenv(EnvChatDevToken, "dev-token")
	c, err = ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, "dev-token", c.ChatDevToken)
}

// TestConfigFromEnvLimits: each bounded number setting leaves the
// default when empty, takes a value in range and refuses the rest, saying
// what it wants.
func TestConfigFromEnvLimits(t *testing.T) {
	tests := []struct {
		env, set string
		got      func(Config) int64
		want     int64
		bad      []string
		wantErr  string // after `<env>="<value>": `
	}{
		{"AGENTFLOW_MAX_STREAMS_PER_TENANT", "25", func(c Config) int64 { return int64(c.MaxStreamsPerTenant) }, 25,
			[]string{"0", "-3", "many", "1000001"}, "want open streams per tenant, 1 to 1000000"},
		{"AGENTFLOW_MAX_UPLOAD_BYTES", "1048576", func(c Config) int64 { return c.MaxUploadBytes }, 1 << 20,
			[]string{"0", "-3", "20MiB", "268435457"}, "want the largest upload in bytes, 1 to 268435456"},
		{"AGENTFLOW_OPENAPI_MAX_SPEC_BYTES", "134217728", func(c Config) int64 { return c.OpenAPIMaxSpecBytes }, 128 << 20,
			[]string{"0", "-3", "64MiB", "1073741825"}, "want the largest API document in bytes, 1 to 1073741824"},
		{"AGENTFLOW_HTTP_CLIENT_INFLIGHT_BYTES", "134217728", func(c Config) int64 { return c.HTTPClientInflightBytes }, 128 << 20,
			[]string{"0", "-3", "64MiB", "17179869185"}, "want bytes in flight, 1 to 17179869184"},
		{"AGENTFLOW_HTTP_INFLIGHT_BYTES", "536870912", func(c Config) int64 { return c.HTTPInflightBytes }, 512 << 20,
			[]string{"0", "-3", "1GiB", "17179869185"}, "want bytes in flight, 1 to 17179869184"},
		{"AGENTFLOW_HTTP_HEADER_TIMEOUT", "10s", func(c Config) int64 { return int64(c.HTTPHeaderTimeout) }, int64(10 * time.Second),
			[]string{"0s", "500ms", "6m", "soon"}, "want a duration such as 30s, 1s to 5m"},
		{"AGENTFLOW_HTTP_BODY_TIMEOUT", "2m", func(c Config) int64 { return int64(c.HTTPBodyTimeout) }, int64(2 * time.Minute),
			[]string{"0s", "500ms", "61m", "soon"}, "want a duration such as 30s, 1s to 1h"},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			t.Setenv(tt.env, "")
			c, err := ConfigFromEnv()
			require.NoError(t, err)
			require.Zero(t, tt.got(c), "empty: the default of the part that reads it")

			t.Setenv(tt.env, tt.set)
			c, err = ConfigFromEnv()
			require.NoError(t, err)
			require.Equal(t, tt.want, tt.got(c))

			for _, v := range tt.bad {
				t.Setenv(tt.env, v)
				_, err := ConfigFromEnv()
				require.EqualError(t, err, tt.env+`="`+v+`": `+tt.wantErr)
			}
		})
	}
}

func TestConfigFromEnvOIDC(t *testing.T) {
	c, err := ConfigFromEnv()
	require.NoError(t, err)
	require.Nil(t, c.OIDC, "off without an issuer")

	t.Setenv("AGENTFLOW_OIDC_ISSUER", "https://login.example.com/realms/acme")
	t.Setenv("AGENTFLOW_OIDC_AUDIENCE", "agentflow")
	t.Setenv("AGENTFLOW_OIDC_CLAIMS", "tenant=org_id,roles=groups,name=email")
	t.Setenv("AGENTFLOW_OIDC_ROLES", "*=user,agentflow-admins=admin")
	c, err = ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, "https://login.example.com/realms/acme", c.OIDC.Issuer)
	require.Equal(t, "agentflow", c.OIDC.Audience)
	require.Equal(t, oidcauth.Claims{Tenant: "org_id", Roles: "groups", Name: "email"}, c.OIDC.Claims)
	require.Equal(t, "*=user,agentflow-admins=admin", c.OIDC.Roles.String())

	for env, bad := range map[string]struct{ v, want string }{
		"AGENTFLOW_OIDC_CLAIMS": {"org=org_id", `AGENTFLOW_OIDC_CLAIMS: entry "org=org_id": unknown field "org"`},
		"AGENTFLOW_OIDC_ROLES":  {"admins=Admin", `AGENTFLOW_OIDC_ROLES: entry "admins=Admin": role "Admin"`},
	} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, bad.v)
			_, err := ConfigFromEnv()
			require.ErrorContains(t, err, bad.want)
		})
	}

	t.Setenv("AGENTFLOW_OIDC_ISSUER", "")
	_, err = ConfigFromEnv()
	require.ErrorContains(t, err, "is set but AGENTFLOW_OIDC_ISSUER is not")
}

// TestOIDCExample: the OIDC settings docs/guides/grpc.md shows for
// Keycloak are read as it says.
func TestOIDCExample(t *testing.T) {
	page, err := docs.Page("guides/grpc.md")
	require.NoError(t, err)
	_, block, ok := strings.Cut(page, "```sh\nAGENTFLOW_OIDC_ISSUER=")
	require.True(t, ok, "the page has the example")
	block, _, _ = strings.Cut("AGENTFLOW_OIDC_ISSUER="+block, "```")
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		name, value, ok := strings.Cut(line, "=")
		require.True(t, ok, line)
		t.Setenv(name, strings.Trim(value, "'"))
	}
	c, err := ConfigFromEnv()
	require.NoError(t, err)
	require.NoError(t, c.OIDC.Validate())
	require.Equal(t, oidcauth.Claims{Tenant: "tenant", Roles: "realm_access.roles", Name: "preferred_username"}, c.OIDC.Claims)
	require.Equal(t, "*=user,agentflow-admin=admin+approver,agentflow-approver=approver", c.OIDC.Roles.String())
}

func TestConfigFromEnvStopTimeout(t *testing.T) {
	c, err := ConfigFromEnv()
	require.NoError(t, err)
	require.Zero(t, c.StopTimeout, "unset: the default")
	require.Equal(t, DefaultStopTimeout, (&Server{cfg: c}).stopTimeout())
	t.Setenv("AGENTFLOW_STOP_TIMEOUT", "90s")
	c, err = ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, 90*time.Second, (&Server{cfg: c}).stopTimeout())
	for _, bad := range []string{"30", "0s", "500ms", "2h", "soon"} {
		t.Setenv("AGENTFLOW_STOP_TIMEOUT", bad)
		_, err := ConfigFromEnv()
		require.ErrorContains(t, err, "AGENTFLOW_STOP_TIMEOUT="+strconv.Quote(bad)+": want a duration such as 30s or 2m, 1s to 1h")
	}
}

// TestConfigFromEnvMaxModelTimeout: the operator's limit on a model
// call's attempt is a duration from 1s to 1h; unset, none.
func TestConfigFromEnvMaxModelTimeout(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://x")
	c, err := ConfigFromEnv()
	require.NoError(t, err)
	require.Zero(t, c.MaxModelTimeout)
	t.Setenv("AGENTFLOW_MAX_MODEL_TIMEOUT", "45s")
	c, err = ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, 45*time.Second, c.MaxModelTimeout)
	for _, bad := range []string{"45", "500ms", "2h"} {
		t.Setenv("AGENTFLOW_MAX_MODEL_TIMEOUT", bad)
		_, err := ConfigFromEnv()
		require.ErrorContains(t, err, "AGENTFLOW_MAX_MODEL_TIMEOUT="+strconv.Quote(bad)+": want a duration such as 30s, 1s to 1h")
	}
}

// TestConfigFromEnvMaxToolTimeout: the operator's limit on a tool call's
// attempt is a duration from 1s to 1h; unset, none.
func TestConfigFromEnvMaxToolTimeout(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://x")
	c, err := ConfigFromEnv()
	require.NoError(t, err)
	require.Zero(t, c.MaxToolTimeout)
	t.Setenv("AGENTFLOW_MAX_TOOL_TIMEOUT", "10m")
	c, err = ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, 10*time.Minute, c.MaxToolTimeout)
	for _, bad := range []string{"45", "500ms", "2h"} {
		t.Setenv("AGENTFLOW_MAX_TOOL_TIMEOUT", bad)
		_, err := ConfigFromEnv()
		require.ErrorContains(t, err, "AGENTFLOW_MAX_TOOL_TIMEOUT="+strconv.Quote(bad)+": want a duration such as 30s, 1s to 1h")
	}
}

func TestConfigFromEnvDeployment(t *testing.T) {
	t.Setenv(deploy.EnvDeploymentName, "agentflow")
	t.Setenv(deploy.EnvBuildID, "v2")
	c, err := ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, deploy.Version{Name: "agentflow", BuildID: "v2"}, c.Deployment)
	require.True(t, c.Deployment.On())
}

// TestConfigFromEnvTemporalConnection: the Temporal clients' standard
// settings reach the process's connection — an API key turns TLS on (as
// Temporal Cloud wants), metadata goes with every call — and a
// certificate that cannot be read fails the configuration, naming the
// settings.
func TestConfigFromEnvTemporalConnection(t *testing.T) {
	c, err := ConfigFromEnv()
	require.NoError(t, err)
	require.Nil(t, c.TemporalConnection.ConnectionOptions.TLS, "plaintext by default")
	require.Nil(t, c.TemporalConnection.Credentials)

	t.Setenv("TEMPORAL_ADDRESS", "acme.a1b2c.tmprl.cloud:7233")
	t.Setenv("TEMPORAL_NAMESPACE", "acme.a1b2c")
	t.Setenv("TEMPORAL_API_KEY", "key-1")
	t.Setenv("TEMPORAL_GRPC_META_X_TEAM", "agents")
	c, err = ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, "acme.a1b2c.tmprl.cloud:7233", c.TemporalAddress)
	require.Equal(t, "acme.a1b2c", c.Namespace)
	require.NotNil(t, c.TemporalConnection.ConnectionOptions.TLS, "an API key goes over TLS")
	require.NotNil(t, c.TemporalConnection.Credentials)
	headers, err := c.TemporalConnection.HeadersProvider.GetHeaders(t.Context())
	require.NoError(t, err)
	require.Equal(t, map[string]string{"x-team": "agents"}, headers)

	t.Setenv("TEMPORAL_TLS_CLIENT_CERT_PATH", "/nonexistent/worker.pem")
	t.Setenv("TEMPORAL_TLS_CLIENT_KEY_PATH", "/nonexistent/worker-key.pem")
	_, err = ConfigFromEnv()
	require.ErrorContains(t, err, "temporal connection settings (TEMPORAL_TLS_*, TEMPORAL_API_KEY)")
	require.ErrorContains(t, err, "/nonexistent/worker.pem")
}

// TestLoopback tells a local stack's Temporal address from a remote
// one: compression is off and the unversioned worker's warning silent
// only for this machine.
func TestLoopback(t *testing.T) {
	for _, tc := range []struct {
		address string
		want    bool
	}{
		{"127.0.0.1:7233", true},
		{"localhost:7233", true},
		{"[::1]:7233", true},
		{"127.0.0.2", true},
		{"temporal-frontend.temporal:7233", false},
		{"10.0.0.5:7233", false},
		{"localhost.example.com:7233", false},
	} {
		require.Equal(t, tc.want, Loopback(tc.address), tc.address)
	}
}

// TestConfigFromEnvDeadlockDetectionTimeout: a duration from 1s to 1m;
// unset, the SDK's default.
func TestConfigFromEnvDeadlockDetectionTimeout(t *testing.T) {
	c, err := ConfigFromEnv()
	require.NoError(t, err)
	require.Zero(t, c.DeadlockDetectionTimeout, "unset: the SDK's default")
	t.Setenv("AGENTFLOW_DEADLOCK_DETECTION_TIMEOUT", "5s")
	c, err = ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, 5*time.Second, c.DeadlockDetectionTimeout)
	for _, bad := range []string{"5", "0s", "500ms", "2m", "soon"} {
		t.Setenv("AGENTFLOW_DEADLOCK_DETECTION_TIMEOUT", bad)
		_, err := ConfigFromEnv()
		require.ErrorContains(t, err, "AGENTFLOW_DEADLOCK_DETECTION_TIMEOUT="+strconv.Quote(bad)+": want a duration such as 1s or 5s, 1s to 1m")
	}
}
