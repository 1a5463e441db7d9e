package codebase

// doors are the gateway's protocol adapters: each speaks one protocol
// over the gateway's core and knows no other door.
var doors = []string{"a2a", "agui", "aisdk", "mcp", "openai", "sse", "telegram", "ws"}

// harnesses are packages for tests, benchmarks and the fault suite: the
// product's code never links them.
var harnesses = []string{
	"internal/testserver", "internal/testissuer", "internal/testpki", "internal/e2e",
	"internal/tools/mcptest/...", "internal/telemetry/otlptest", "internal/gateway/gatewaytest",
	"internal/chaos/...", "internal/bench/...", "internal/topology", "internal/devstack/devtest",
	"internal/cluster", "internal/checker",
	"internal/scripted",
}

// Agentflow are the rules agentflow's tree keeps (its test checks them).
var Agentflow = Rules{
	Module:       "github.com/agentflow/agentflow",
	MaxFileLines: 600,
	MaxFuncLines: 80,
	Imports: append([]ImportRule{
		{
			From: "internal/agent", Not: []string{"internal/...", "activities/...", "workflows/...", "worker/...", "starter/...", "go.temporal.io/...", "github.com/jackc/pgx/...", "net/http"},
			Allow: []string{"internal/words"},
			Why:   "the domain types are the centre: they depend on nothing of the tree but its words, on no SDK and no I/O",
		},
		{
			From: "workflows", Not: []string{"activities/...", "internal/store/...", "internal/gateway/...", "internal/llm/...", "internal/tools/...", "internal/server/...",
				"github.com/jackc/pgx/...", "net/http", "os", "os/exec", "math/rand", "math/rand/v2", "crypto/rand", "sync"},
			Why: "workflow code is deterministic: I/O, its adapters and Go's own concurrency belong in activities",
		},
		{
			From: "internal/contract", Not: []string{"activities/...", "workflows/...", "internal/store/...", "internal/gateway/...", "internal/server/..."},
			Why: "the contract between workflows and activities depends on neither side",
		},
		{
			From: "activities/...", Not: []string{"workflows/...", "internal/gateway/...", "internal/server/..."},
			Why: "activities adapt the edges for the workflows; they know no workflow and no door",
		},
		{
			From: "internal/gateway", Not: append(prefixed("internal/gateway/", doors), "internal/gateway/doors"),
			Why: "the gateway's core serves every door and knows none",
		},
		{
			From: "...", Not: harnesses,
			Except: append(slicesOf(harnesses), "internal/server", "starter"),
			Why:    "test harnesses, the scripted model and the fault suite stay out of the product's binaries",
		},
		{
			From: "...", Not: prefixed("internal/gateway/", doors),
			Except: []string{"internal/gateway/doors", "internal/chaos/..."},
			Why:    "a door is reached through the gateway's door list (internal/gateway/doors), never by name",
		},
	}, doorRules()...),
}

// doorRules keep each door to its protocol: no door imports another, the
// door list, or the store (the core, or the interfaces the door list
// fills, answer for it).
func doorRules() []ImportRule {
	var out []ImportRule
	for _, d := range doors {
		var others []string
		for _, o := range doors {
			if o != d {
				others = append(others, "internal/gateway/"+o)
			}
		}
		out = append(out, ImportRule{
			From: "internal/gateway/" + d, Not: others,
			Why: "a door speaks its protocol over the gateway's core: it reaches no other door",
		})
		out = append(out, ImportRule{
			From: "internal/gateway/" + d, Not: []string{"internal/store/...", "github.com/jackc/pgx/..."},
			Why: "a door reaches the database only through the gateway's core or an interface of its own",
		})
	}
	return out
}

func prefixed(prefix string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return out
}

func slicesOf(s []string) []string { return append([]string(nil), s...) }

// AgentflowLinks are what agentflow's binaries and central packages may
// carry, with all they link.
var AgentflowLinks = []LinkRule{
	{
		Root: "internal/catalog", Never: []string{"internal/store/...", "github.com/jackc/...", "github.com/lib/pq/...", "database/sql"},
		Why: "the catalog is files and their checks: it links no database",
	},
	{
		Root: "internal/catalog", Never: []string{"go.temporal.io/..."}, Through: []string{"internal/tools", "internal/approval"},
		Why: "the catalog links Temporal only through the tool kinds and approvals it checks entries with",
	},
	{
		Root: "internal/tenant", Never: []string{"internal/catalog/...", "internal/gateway/...", "activities/...", "workflows/..."},
		Why: "tenant reads the store, never catalog files, and links nothing of the gateway, the activities or the workflows, which all hold a Cache",
	},
	{
		Root: "internal/memory", Only: []string{"internal/agent", "internal/words"},
		Why: "what memory is can be read alone: the package links the domain and the standard library, nothing else",
	},
	{
		Root: "worker", Never: harnesses,
		Why: "the production worker carries no test harness and no scripted model (the starter's demo serves it)",
	},
}
