package secrets

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// EnvGrants is the variable the operator grants secrets to tenants with.
const EnvGrants = "AGENTFLOW_SECRETS"

// Grants say which secret references each tenant's catalog may name. They
// are the operator's (AGENTFLOW_SECRETS), not a catalog's: a worker's
// environment holds the secrets of every tenant and of the platform
// itself, and a tenant admin who could name any variable could send
// another tenant's key, or the database's password, to a host of its own.
// A zero Grants grants nothing.
//
// Whatever a grant says, the platform's own variables are no tenant's
// (platformVariable), nor are the system's files (systemFile).
type Grants struct {
	byTenant map[string][]string // tenant ("*": every tenant) → patterns
}

// ParseGrants reads AGENTFLOW_SECRETS: comma-separated entries
//
//	<tenant>=<pattern>[+<pattern>…]
//
// where <tenant> is a tenant id or * (every tenant) and a pattern is a
// reference (env:FLIGHTS_TOKEN, file:/var/run/secrets/crm-token) or a
// reference prefix ending in * (env:ACME_*, file:/var/run/secrets/acme/*).
// A tenant may appear in several entries.
func ParseGrants(v string) (Grants, error) {
	g := Grants{byTenant: map[string][]string{}}
	for _, entry := range words.ListEntries(v) {
		tenant, patterns, ok := strings.Cut(entry, "=")
		if !ok || tenant == "" || patterns == "" {
			return Grants{}, fmt.Errorf("AGENTFLOW_SECRETS: entry %q: want <tenant>=<reference>[+<reference>…], e.g. demo=env:FLIGHTS_TOKEN+env:CRM_*", clipEntry(entry))
		}
		if tenant != "*" {
			if err := agent.ValidateID("tenant", tenant); err != nil {
				return Grants{}, fmt.Errorf("AGENTFLOW_SECRETS: entry %q: %v", clipEntry(entry), err)
			}
		}
		for _, p := range strings.Split(patterns, "+") {
			if err := checkPattern(p); err != nil {
				return Grants{}, fmt.Errorf("AGENTFLOW_SECRETS: entry %q: %w", clipEntry(entry), err)
			}
			g.byTenant[tenant] = append(g.byTenant[tenant], p)
		}
	}
	return g, nil
}

// GrantAll grants every tenant every env: reference but the platform's
// own variables, and no file: reference: for tests and single-tenant
// setups that choose it.
func GrantAll() Grants { return Grants{byTenant: map[string][]string{"*": {"env:*"}}} }

// checkPattern checks one pattern: a valid reference, or a reference's
// start (scheme:, or scheme: and the start of a name) followed by *. A
// file: pattern names a folder or more (file:/ would grant every file).
func checkPattern(p string) error {
	prefix, wildcard := strings.CutSuffix(p, "*")
	if !wildcard {
		return ValidateRef(p)
	}
	// Completed with one letter, a reference's start is a reference.
	if strings.Contains(prefix, "*") || ValidateRef(prefix+"X") != nil {
		return fmt.Errorf("pattern %q: want scheme:NAME or scheme:PREFIX*, e.g. env:ACME_* or file:/var/run/secrets/acme/*", p)
	}
	if prefix == SchemeFile+":/" {
		return fmt.Errorf("pattern %q would grant every file of the machine: name the folder of the tenant's secrets, e.g. file:/var/run/secrets/acme/*", p)
	}
	return nil
}

// Allows says whether tenant may name ref: agent.CodeInvalid, naming the
// reference and the variable, when it may not — the catalog's to fix, and
// at call time a tool error the model reads, as egress refusals are.
func (g Grants) Allows(tenant, ref string) error {
	scheme, name, err := parseRef(ref)
	if err != nil {
		return agent.Errorf(agent.CodeInvalid, "%v", err)
	}
	if scheme == SchemeEnv && platformVariable(name) {
		return agent.Errorf(agent.CodeInvalid, "secret %s is a variable of the platform itself, which no tenant may name", ref)
	}
	if scheme == SchemeFile && systemFile(name) {
		return agent.Errorf(agent.CodeInvalid, "secret %s is a file of the system (/proc, /sys, /dev), which no tenant may name", ref)
	}
	for _, t := range []string{tenant, "*"} {
		if slices.ContainsFunc(g.byTenant[t], func(p string) bool { return matchPattern(p, ref) }) {
			return nil
		}
	}
	return agent.Errorf(agent.CodeInvalid, "secret %s is not one tenant %q may name: the operator grants secrets to tenants with AGENTFLOW_SECRETS", ref, tenant)
}

// folder is the folder the grants of tenant name for ref, a file:
// reference they allow: of a pattern's, the folder its prefix is in
// (file:/srv/secrets/ta/* names /srv/secrets/ta); of a grant of one file,
// the file's folder. Of several, the widest, which the grants open
// whole anyway.
func (g Grants) folder(tenant, ref string) string {
	var out string
	for _, t := range []string{tenant, "*"} {
		for _, p := range g.byTenant[t] {
			if !matchPattern(p, ref) {
				continue
			}
			name, _ := strings.CutPrefix(strings.TrimSuffix(p, "*"), SchemeFile+":")
			dir := path.Dir(name + "x")
			if out == "" || len(dir) < len(out) {
				out = dir
			}
		}
	}
	return out
}

func matchPattern(p, ref string) bool {
	if prefix, ok := strings.CutSuffix(p, "*"); ok {
		return strings.HasPrefix(ref, prefix)
	}
	return p == ref
}

// systemFile reports whether a path is under /proc, /sys or /dev: never
// a mounted secret, and /proc/self/environ holds the platform's own
// variables.
func systemFile(p string) bool {
	for _, dir := range []string{"/proc", "/sys", "/dev"} {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}

// platformVariable reports whether an environment variable configures the
// platform (its database, Temporal, tokens, telemetry, model providers,
// the AWS credential its object store may take from the default chain):
// those hold the platform's secrets, and no grant opens them.
func platformVariable(name string) bool {
	switch name {
	case "DATABASE_URL":
		return true
	}
	for _, prefix := range []string{"AGENTFLOW_", "TEMPORAL_", "OTEL_", "PG", "OPENAI_", "ANTHROPIC_", "OLLAMA_", "AWS_"} {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// clipEntry cuts an entry quoted in an error.
func clipEntry(s string) string { return words.Clip(s, 80) }

type tenantKey struct{}

type folderKey struct{}

// folderIn is the folder a file: secret at name is read in (Files): the
// one its grant names (Scoped), else its own.
func folderIn(ctx context.Context, name string) string {
	if dir, _ := ctx.Value(folderKey{}).(string); dir != "" {
		return dir
	}
	return path.Dir(name)
}

// WithTenant returns a context whose secrets are resolved for tenant: a
// Scoped resolver refuses what the tenant was not granted.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// TenantIn returns the tenant of ctx, "" when none.
func TenantIn(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}

// Scoped returns a resolver that resolves through r only the references
// the tenant of the call's context (WithTenant) was granted; without a
// tenant it resolves nothing. The tool registry gives tools such a
// resolver, so that no tool kind resolves a secret for a tenant that may
// not name it.
func Scoped(r Resolver, g Grants) Resolver { return scoped{next: r, grants: g} }

type scoped struct {
	next   Resolver
	grants Grants
}

func (s scoped) Resolve(ctx context.Context, ref string) (string, error) {
	tenant := TenantIn(ctx)
	if tenant == "" {
		return "", agent.Errorf(agent.CodeInvalid, "secret %s: no tenant to resolve it for", ref)
	}
	if err := s.grants.Allows(tenant, ref); err != nil {
		return "", err
	}
	if strings.HasPrefix(ref, SchemeFile+":") {
		ctx = context.WithValue(ctx, folderKey{}, s.grants.folder(tenant, ref))
	}
	return s.next.Resolve(ctx, ref)
}
