package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentflow/agentflow/internal/agent"
)

// Tool versions in agent versions.
//
// An agent version holds its tools' specs, resolved when it is stored;
// each also names the definition it is (agent.ToolVersion): the version of
// the tenant's tool_versions whose spec_hash is the tool's content hash
// (agent.Tool.ContentHash), else 0 — a tool defined inside its agent, or
// one whose definition the tenant's catalog does not hold — with the hash
// all the same. The turn that pins the agent version pins its tools'
// versions with it, and each tool call's result step keeps the version
// that ran (agent.Message.ToolVersion).

// sqlToolVersionsByHash finds, for each (name, spec_hash), the tenant's
// version of the tool with that spec: the active one when it has it, else
// the newest (a spec staged, or applied again after another, has several).
const sqlToolVersionsByHash = `
SELECT DISTINCT ON (v.name) v.name, v.spec_hash, v.version
FROM tool_versions v
JOIN tools t ON t.tenant_id = v.tenant_id AND t.name = v.name
JOIN unnest($2::text[], $3::text[]) AS w(name, spec_hash) ON w.name = v.name AND w.spec_hash = v.spec_hash
WHERE v.tenant_id = $1
ORDER BY v.name, (v.version = t.active_version) DESC, v.version DESC`

// versionTools sets each tool's Version and SpecHash (see above), in
// place, reading the tenant's tool_versions in tx: so a tool of the
// document being applied, stored earlier in tx, is found too.
func versionTools(ctx context.Context, tx pgx.Tx, tenantID string, tools []agent.Tool) error {
	if len(tools) == 0 {
		return nil
	}
	names := make([]string, len(tools))
	hashes := make([]string, len(tools))
	for i := range tools {
		names[i], hashes[i] = tools[i].Name, tools[i].ContentHash()
		tools[i].Version, tools[i].SpecHash = 0, hashes[i]
	}
	rows, err := tx.Query(ctx, sqlToolVersionsByHash, tenantID, names, hashes)
	if err != nil {
		return fmt.Errorf("read tool versions: %w", err)
	}
	found := map[[2]string]int{}
	var name, hash string
	var version int
	_, err = pgx.ForEachRow(rows, []any{&name, &hash, &version}, func() error {
		found[[2]string{name, hash}] = version
		return nil
	})
	if err != nil {
		return fmt.Errorf("read tool versions: %w", err)
	}
	for i := range tools {
		tools[i].Version = found[[2]string{tools[i].Name, tools[i].SpecHash}]
	}
	return nil
}
