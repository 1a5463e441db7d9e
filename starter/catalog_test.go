package main

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"gopkg.in/yaml.v3"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/server"
	"github.com/agentflow/agentflow/internal/tools/mcptest"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// Bearer tokens of the test gateway.
const (
	demoToken = "tok"   // tenant demo
	acmeToken = "other" // tenant acme
	// operatorToken is demo's, with a role of the tenant's own.
	operatorToken = "olga"
)

// startGateway runs a gateway (no worker: the catalog service needs none)
// on the test stack, with a database of its own, and returns it. Its
// operator opens loopback, where the sample catalog's flights API and the
// tests' servers listen.
func startGateway(t *testing.T) *server.Server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	address, namespace := devtest.Temporal(t)
	srv, err := server.New(ctx, server.Config{
		TemporalAddress: address, Namespace: namespace, TaskQueue: "starter-" + newJobID(),
		DatabaseURL: devtest.Database(t), HTTPAddr: "off",
		Roles: []string{server.RoleGateway}, GRPCAddr: "127.0.0.1:0",
		Tokens:      mustTokens(t, demoToken+"=demo:user+admin:ops,"+acmeToken+"=acme:user+admin,"+operatorToken+"=demo:admin+operator:olga"),
		EgressAllow: []string{"127.0.0.0/8"},
		// The MCP recipe's token is the demo tenant's to name.
		SecretGrants: mustGrants(t, "demo=env:TEST_MCP_TOKEN"),
	}, zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		srv.Close()
	})
	return srv
}

// starter runs a command of the starter against the gateway at addr.
func starter(ctx context.Context, addr, token string, args ...string) (string, error) {
	n := 1 // the command's words
	if args[0] == "catalog" || args[0] == "process" || args[0] == "eval" {
		n = 2
	}
	var out bytes.Buffer
	err := run(ctx, slices.Concat(args[:n], []string{"--addr", addr, "--token", token}, args[n:]), &out)
	return out.String(), err
}

func TestCatalogApplyThroughGateway(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := startGateway(t)
	addr := srv.GRPCAddr()

	out, err := starter(ctx, addr, demoToken, "catalog", "apply", "-f", "../catalog", "--dry-run")
	require.NoError(t, err)
	require.Contains(t, out, "  created   tenant demo/demo\n")
	require.Contains(t, out, "  created   agent demo/assistant v1\n")
	require.Contains(t, out, "  created   rule  demo/ops-console\n")
	require.Contains(t, out, "dry run: nothing was applied")
	_, err = srv.Store().TenantSettings(ctx, "demo")
	require.True(t, agent.IsCode(err, agent.CodeNotFound), "a dry run stores nothing: %v", err)

	// The address and token from the environment, as chat reads them.
	t.Setenv("AGENTFLOW_GRPC_ADDR", addr)
	t.Setenv("AGENTFLOW_TOKEN", demoToken)
	var b bytes.Buffer
	require.NoError(t, run(ctx, []string{"catalog", "apply", "-f", "../catalog/demo.yaml"}, &b))
	require.Contains(t, b.String(), "  created   agent demo/assistant v1\n")
	require.Contains(t, b.String(), "  created   tool  demo/checked_calculator v1\n")
	r, err := srv.Store().TenantSettings(ctx, "demo")
	require.NoError(t, err)
	require.Equal(t, "assistant", r.DefaultAgent)
	require.Contains(t, b.String(), "applied: catalog version ")

	b.Reset()
	require.NoError(t, run(ctx, []string{"catalog", "apply", "-f", "../catalog"}, &b))
	require.Contains(t, b.String(), "  unchanged agent demo/assistant v1\n", "applying again changes nothing")

	// The local stack's path: the documents rewritten with another model.
	files, err := readCatalog("../catalog")
	require.NoError(t, err)
	byTenant, err := splitByTenant(files, "anthropic:claude-3-5-haiku-latest")
	require.NoError(t, err)
	resp, err := applyCatalog(ctx, apiFlags{addr: &addr, token: ptr(demoToken)}, &pb.UpsertCatalogRequest{Files: byTenant["demo"], DryRun: true})
	require.NoError(t, err)
	b.Reset()
	printCatalogReport(&b, resp, true)
	require.Contains(t, b.String(), "  updated   agent demo/assistant v2\n")
	require.Contains(t, b.String(), "  unchanged tool  demo/calculator v1\n")
}

func ptr[T any](v T) *T { return &v }

func TestCatalogApplyReportsProblems(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := startGateway(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("tenant: demo\nagents:\n  - id: a\n    model: gpt4\n    colour: blue\n"), 0o644))

	out, err := starter(ctx, srv.GRPCAddr(), demoToken, "catalog", "apply", "-f", dir)
	require.Error(t, err)
	require.Empty(t, out)
	require.Equal(t, codes.InvalidArgument, status.Code(err))
	lines := strings.Split(err.Error(), "\n")
	require.Equal(t, "catalog apply: nothing was applied; the catalog has problems:", lines[0])
	require.Len(t, lines, 3, "one problem per line: %s", err)
	require.True(t, strings.HasPrefix(lines[1], bad+":4: agents[0].model: "), lines[1])
	require.True(t, strings.HasPrefix(lines[2], bad+":5: agents[0]"), lines[2])
	require.Contains(t, lines[2], "colour")
	_, err = srv.Store().TenantSettings(ctx, "demo")
	require.True(t, agent.IsCode(err, agent.CodeNotFound), "nothing was applied: %v", err)
}

func TestCatalogApplyRefusals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	addr := startGateway(t).GRPCAddr()

	// A token changes its own tenant only.
	_, err := starter(ctx, addr, acmeToken, "catalog", "apply", "-f", "../catalog")
	require.Equal(t, codes.PermissionDenied, status.Code(err))
	require.EqualError(t, err, `catalog apply: the documents name tenant "demo"; this token may only change tenant "acme"`)

	_, err = starter(ctx, addr, "nobody", "catalog", "apply", "-f", "../catalog")
	require.EqualError(t, err, "catalog apply: unknown token (set --token or AGENTFLOW_TOKEN)")

	_, err = starter(ctx, "127.0.0.1:1", demoToken, "catalog", "apply", "-f", "../catalog")
	require.Equal(t, codes.Unavailable, status.Code(err))
	require.ErrorContains(t, err, "(gateway 127.0.0.1:1; set --addr or AGENTFLOW_GRPC_ADDR)")

	_, err = starter(ctx, addr, demoToken, "catalog", "apply")
	require.ErrorContains(t, err, "name the catalog with -f")
	_, err = starter(ctx, addr, demoToken, "catalog", "apply", "-f", "../catalog", "extra")
	require.ErrorContains(t, err, `unexpected argument "extra"`)
	_, err = starter(ctx, addr, demoToken, "catalog", "apply", "-f", "no/such/dir")
	require.ErrorContains(t, err, "no/such/dir")
	_, err = starter(ctx, addr, demoToken, "catalog", "apply", "-f", t.TempDir())
	require.ErrorContains(t, err, "no *.yaml or *.yml files")
}

func TestSplitByTenant(t *testing.T) {
	files := map[string]string{
		"demo.yaml": "tenant: demo # kept as it is\nagents:\n  - id: a\n    model: openai:gpt-4o-mini\n",
		"two.yaml":  "tenant: acme\ntools: []\n---\ntenant: demo\ndefault_agent: a\n---\ndefault_agent: b\n",
		"none.yaml": "# no document\n",
	}
	got, err := splitByTenant(files, "")
	require.NoError(t, err)
	require.Equal(t, []string{"acme", "demo"}, slices.Sorted(maps.Keys(got)))
	require.Equal(t, files["demo.yaml"], got["demo"]["demo.yaml"], "a file of one tenant is sent as it is")
	require.Equal(t, "tenant: acme\ntools: []\n---\ndefault_agent: b\n", got["acme"]["two.yaml"],
		"a document without a tenant goes with its file's first tenant")
	require.Equal(t, "tenant: demo\ndefault_agent: a\n", got["demo"]["two.yaml"])
	require.Equal(t, files["none.yaml"], got["acme"]["none.yaml"], "the gateway says what is wrong with it")

	got, err = splitByTenant(map[string]string{"demo.yaml": files["demo.yaml"]}, "anthropic:claude-3-5-haiku-latest")
	require.NoError(t, err)
	var doc struct {
		Agents []struct{ Model string }
	}
	require.NoError(t, yaml.Unmarshal([]byte(got["demo"]["demo.yaml"]), &doc))
	require.Equal(t, "anthropic:claude-3-5-haiku-latest", doc.Agents[0].Model)

	got, err = splitByTenant(map[string]string{"x.yaml": "tenant: [unclosed\n"}, "")
	require.NoError(t, err)
	require.Contains(t, got[""], "x.yaml", "a syntax error is the gateway's to report")
}

func TestLocalTokens(t *testing.T) {
	l := &local{}
	require.NoError(t, l.chooseTokens([]string{"acme", "demo"}, ""))
	require.True(t, l.ownTokens)
	require.Len(t, l.cfg.Tokens, 2)
	for _, tok := range l.cfg.Tokens {
		require.Equal(t, gateway.AllRoles(), tok.Roles, "the local stack's tokens may do everything")
	}
	require.Equal(t, map[string]string{"demo": "dev-token", "acme": "dev-token-acme"}, l.tokens)
	require.Equal(t, "token dev-token-acme for tenant acme, token dev-token for tenant demo", l.tokenNote())

	const configured = "s3cret=demo:user+admin:ops, reader=demo:user, sha256:" +
		"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08=acme:admin"
	toks, err := gateway.ParseTokens(configured)
	require.NoError(t, err)
	l = &local{cfg: server.Config{Tokens: toks}}
	require.NoError(t, l.chooseTokens([]string{"demo"}, configured))
	require.Equal(t, "s3cret", l.tokens["demo"], "the admin token of the tenant")
	require.NotContains(t, l.tokenNote(), "s3cret", "configured tokens are not printed")
	err = l.chooseTokens([]string{"acme", "demo"}, configured)
	require.ErrorContains(t, err, `tenant "acme", and AGENTFLOW_TOKENS has no plain token with the admin role for it`)
}

func mustTokens(t *testing.T, spec string) []gateway.Token {
	t.Helper()
	toks, err := gateway.ParseTokens(spec)
	require.NoError(t, err)
	return toks
}

// mcpCatalog grants agent triage two tools of an MCP server. @URL and
// @HOST stand for the server's endpoint and host:port.
const mcpCatalog = `
tenant: demo
default_agent: triage
egress: ["@HOST"]
tools:
  - name: gh
    kind: mcp
    approval: never
    config:
      url: "@URL"
      tools: [search, get_issue]
      headers: [{name: Authorization, prefix: "Bearer ", secret: "env:TEST_MCP_TOKEN"}]
      timeout_sec: 10
agents:
  - id: triage
    model: openai:gpt-4o-mini
    tools: [gh]
`

// TestCatalogApplyMCP: applying an MCP server's entry lists the tools it
// stands for, each with the entry it comes from; with the server down the
// apply fails and says how to go on, and --allow-unreachable applies the
// catalog without the server's tools.
func TestCatalogApplyMCP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := startGateway(t)
	addr := srv.GRPCAddr()
	token := "mcp-" + newJobID()
	t.Setenv("TEST_MCP_TOKEN", token)
	issues := mcptest.StartHTTP(t, mcptest.Options{Token: token})
	file := filepath.Join(t.TempDir(), "demo.yaml")
	doc := strings.NewReplacer("@URL", issues.URL, "@HOST", issues.Addr).Replace(mcpCatalog)
	require.NoError(t, os.WriteFile(file, []byte(doc), 0o644))

	out, err := starter(ctx, addr, demoToken, "catalog", "apply", "-f", file)
	require.NoError(t, err)
	require.Contains(t, out, "  created   tool  demo/gh_search v1 (from gh)\n")
	require.Contains(t, out, "  created   tool  demo/gh_get_issue v1 (from gh)\n")
	require.Contains(t, out, "  created   agent demo/triage v1\n")
	require.NotContains(t, out, "gh_slow", "config.tools grants only search and get_issue")
	ag, err := srv.Store().ActiveAgent(ctx, "demo", "triage")
	require.NoError(t, err)
	var names []string
	for _, tool := range ag.Tools {
		names = append(names, tool.Name)
	}
	require.Equal(t, []string{"gh_search", "gh_get_issue"}, names)

	issues.Kill()
	_, err = starter(ctx, addr, demoToken, "catalog", "apply", "-f", file)
	require.Error(t, err)
	require.ErrorContains(t, err, `tool "gh" (kind mcp): `+issues.URL+" cannot be reached to list its tools")
	require.ErrorContains(t, err, "allow unreachable entries")

	out, err = starter(ctx, addr, demoToken, "catalog", "apply", "-f", file, "--allow-unreachable")
	require.NoError(t, err)
	require.Contains(t, out, "  updated   agent demo/triage v2\n")
	ag, err = srv.Store().ActiveAgent(ctx, "demo", "triage")
	require.NoError(t, err)
	require.Empty(t, ag.Tools, "the server's tools are left out until it is back")

	require.NoError(t, issues.Restart())
	out, err = starter(ctx, addr, demoToken, "catalog", "apply", "-f", file)
	require.NoError(t, err)
	require.Contains(t, out, "  updated   agent demo/triage v3\n")
	require.Contains(t, out, "  unchanged tool  demo/gh_search v1 (from gh)\n")

	// The token is demo's to name, not acme's: the operator granted it to
	// demo alone (AGENTFLOW_SECRETS), so acme's admin cannot send it to a
	// server of its own.
	acme := filepath.Join(t.TempDir(), "acme.yaml")
	require.NoError(t, os.WriteFile(acme, []byte(strings.Replace(doc, "tenant: demo", "tenant: acme", 1)), 0o644))
	_, err = starter(ctx, addr, acmeToken, "catalog", "apply", "-f", acme)
	require.ErrorContains(t, err, `secret env:TEST_MCP_TOKEN is not one tenant "acme" may name: the operator grants secrets to tenants with AGENTFLOW_SECRETS`)
	require.ErrorContains(t, err, "acme.yaml:")
}

func mustGrants(t *testing.T, v string) secrets.Grants {
	t.Helper()
	g, err := secrets.ParseGrants(v)
	require.NoError(t, err)
	return g
}
