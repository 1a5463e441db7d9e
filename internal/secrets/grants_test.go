package secrets

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

func TestGrants(t *testing.T) {
	g, err := ParseGrants(" demo=env:FLIGHTS_TOKEN+env:CRM_* , acme=env:ACME_KEY, *=env:SHARED_WEATHER_KEY,demo=env:GH_TOKEN")
	require.NoError(t, err)
	tests := []struct {
		tenant, ref string
		code        agent.Code // "": allowed
		want        string
	}{
		{"demo", "env:FLIGHTS_TOKEN", "", ""},
		{"demo", "env:CRM_KEY", "", ""},
		{"demo", "env:CRM_", "", ""},
		{"demo", "env:GH_TOKEN", "", "a tenant may appear in several entries"},
		{"demo", "env:SHARED_WEATHER_KEY", "", ""},
		{"acme", "env:SHARED_WEATHER_KEY", "", ""},
		{"demo", "env:ACME_KEY", agent.CodeInvalid, `secret env:ACME_KEY is not one tenant "demo" may name: the operator grants secrets to tenants with AGENTFLOW_SECRETS`},
		{"acme", "env:FLIGHTS_TOKEN", agent.CodeInvalid, "AGENTFLOW_SECRETS"},
		{"other", "env:FLIGHTS_TOKEN", agent.CodeInvalid, "AGENTFLOW_SECRETS"},
		{"demo", "env:FLIGHTS_TOKEN2", agent.CodeInvalid, "AGENTFLOW_SECRETS"},
		{"demo", "vault:x", agent.CodeInvalid, "unknown scheme"},
	}
	for _, tt := range tests {
		err := g.Allows(tt.tenant, tt.ref)
		if tt.code == "" {
			require.NoError(t, err, "%s %s: %s", tt.tenant, tt.ref, tt.want)
			continue
		}
		require.Equal(t, tt.code, agent.ErrorCode(err), "%s %s: %v", tt.tenant, tt.ref, err)
		require.ErrorContains(t, err, tt.want)
	}

	// The platform's own variables are no tenant's, even granted.
	all := GrantAll()
	for _, name := range []string{"DATABASE_URL", "AGENTFLOW_TOKENS", "AGENTFLOW_GRPC_TLS_KEY", "TEMPORAL_TLS_KEY", "OTEL_EXPORTER_OTLP_HEADERS",
		"PGPASSWORD", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OLLAMA_HOST", "AWS_SECRET_ACCESS_KEY", "AGENTFLOW_S3_SECRET_ACCESS_KEY"} {
		err := all.Allows("demo", "env:"+name)
		require.Equal(t, agent.CodeInvalid, agent.ErrorCode(err), name)
		require.ErrorContains(t, err, "a variable of the platform itself")
	}
	require.NoError(t, all.Allows("demo", "env:FLIGHTS_TOKEN"))
	require.ErrorContains(t, all.Allows("demo", "file:/var/run/secrets/crm-token"), "AGENTFLOW_SECRETS", "GrantAll grants no files")

	// Files: granted as variables are, and never the system's.
	files, err := ParseGrants("demo=file:/var/run/secrets/demo/*+file:/etc/crm-token,*=file:/p*")
	require.NoError(t, err)
	for ref, want := range map[string]string{
		"file:/var/run/secrets/demo/crm-token":   "",
		"file:/etc/crm-token":                    "",
		"file:/etc/crm-token2":                   `not one tenant "demo" may name`,
		"file:/var/run/secrets/acme/crm-token":   `not one tenant "demo" may name`,
		"file:/var/run/secrets/demo/../acme/key": "want an absolute, clean path",
		"file:/proc/self/environ":                "a file of the system (/proc, /sys, /dev)",
		"file:/pub/key":                          "",
	} {
		err := files.Allows("demo", ref)
		if want == "" {
			require.NoError(t, err, ref)
			continue
		}
		require.Equal(t, agent.CodeInvalid, agent.ErrorCode(err), ref)
		require.ErrorContains(t, err, want, ref)
	}
	for _, dev := range []string{"file:/dev/zero", "file:/sys/kernel/x", "file:/proc"} {
		require.ErrorContains(t, all.Allows("demo", dev), "a file of the system")
	}
	require.Error(t, Grants{}.Allows("demo", "env:FLIGHTS_TOKEN"), "a zero Grants grants nothing")

	for _, tt := range []struct{ v, want string }{
		{"demo", "want <tenant>=<reference>"},
		{"demo=", "want <tenant>=<reference>"},
		{"=env:X", "want <tenant>=<reference>"},
		{"de mo=env:X", "may not contain spaces"},
		{"demo=FLIGHTS", "not a secret reference"},
		{"demo=env:A*B*", "want scheme:NAME or scheme:PREFIX*"},
		{"demo=env:9*", "want scheme:NAME or scheme:PREFIX*"},
		{"demo=vault:*", "want scheme:NAME or scheme:PREFIX*"},
		{"demo=env:X+", "empty secret reference"},
		{"demo=file:/*", "would grant every file of the machine"},
		{"demo=file:*", "want scheme:NAME or scheme:PREFIX*"},
		{"demo=file:/run/../etc/*", "want scheme:NAME or scheme:PREFIX*"},
	} {
		_, err := ParseGrants(tt.v)
		require.ErrorContains(t, err, tt.want, tt.v)
		require.ErrorContains(t, err, "AGENTFLOW_SECRETS", tt.v)
	}
	_, err = ParseGrants("demo=env:*")
	require.NoError(t, err)
}

func TestScoped(t *testing.T) {
	env := NewEnv(func(name string) (string, bool) {
		v, ok := map[string]string{"FLIGHTS_TOKEN": "flights-secret-1", "ACME_KEY": "acme-secret-22", "DATABASE_URL": "postgres://u:p@h/db"}[name]
		return v, ok
	})
	g, err := ParseGrants("demo=env:FLIGHTS_TOKEN,acme=env:ACME_KEY+env:DATABASE_URL")
	require.NoError(t, err)
	r := Scoped(env, g)
	ctx := context.Background()

	v, err := r.Resolve(WithTenant(ctx, "demo"), "env:FLIGHTS_TOKEN")
	require.NoError(t, err)
	require.Equal(t, "flights-secret-1", v)
	_, err = r.Resolve(WithTenant(ctx, "demo"), "env:ACME_KEY")
	require.ErrorContains(t, err, `not one tenant "demo" may name`)
	require.NotContains(t, err.Error(), "acme-secret-22")
	_, err = r.Resolve(WithTenant(ctx, "acme"), "env:DATABASE_URL")
	require.ErrorContains(t, err, "a variable of the platform itself")
	_, err = r.Resolve(ctx, "env:FLIGHTS_TOKEN")
	require.ErrorContains(t, err, "no tenant to resolve it for")
}

// FuzzGrants: any AGENTFLOW_SECRETS value is grants or an error, and
// grants never open a platform variable.
func FuzzGrants(f *testing.F) {
	for _, s := range []string{"demo=env:X", "*=env:*", "demo=env:A_*+env:B,acme=env:C", "demo", "=x", "demo=env:DATABASE_URL"} {
		f.Add(s, "demo", "env:DATABASE_URL")
	}
	f.Add("demo=file:/var/run/secrets/demo/*,*=file:/p*", "demo", "file:/proc/self/environ")
	f.Add("demo=file:/var/run/secrets/demo/*", "demo", "file:/var/run/secrets/demo/../acme/key")
	f.Fuzz(func(t *testing.T, v, tenant, ref string) {
		g, err := ParseGrants(v)
		if err != nil {
			require.Contains(t, err.Error(), "AGENTFLOW_SECRETS")
			return
		}
		err = g.Allows(tenant, ref)
		if err == nil {
			scheme, name, perr := parseRef(ref)
			require.NoError(t, perr)
			require.False(t, scheme == SchemeEnv && platformVariable(name), "%s granted", ref)
			require.False(t, scheme == SchemeFile && systemFile(name), "%s granted", ref)
		}
	})
}
