package store

import (
	"bytes"
	"context"
	"crypto/md5" //nolint:gosec // Content-MD5, which S3-compatible stores check uploads with; not for security
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/objstore"
)

// Compiled agents (migrations/033_compiled_agents.sql): an agent
// version's artefact, by its content hash, in the object store when the
// store has one (Options.Objects), else in its row.

// CompiledAgent is the stored artefact of an agent version.
type CompiledAgent struct {
	// Ref is the artefact's name: agent.CompiledRef of its SHA-256.
	Ref string
	// Format is the agent.CompiledFormat it was compiled in.
	Format string
	// Data is the artefact's bytes (an agent.Compiled as JSON).
	Data []byte
	// ObjectKey is the object store's key of it; "" when kept in its row.
	ObjectKey string
	// CompiledAt is when it was stored.
	CompiledAt time.Time
}

// MaxCompiledBytes bounds an artefact: an agent's prompt and tools are
// bounded well under it by the catalog.
const MaxCompiledBytes = 16 << 20

// CompiledKey is the object store's key of an artefact whose SHA-256 is
// sum (hex): under compiled/, apart from the blobs' and the payloads'
// keys.
func CompiledKey(sum string) string { return "compiled/" + objstore.Key(sum) }

const (
	sqlCompiledAgent = `
SELECT sha256, format, size, object_key, body, compiled_at
FROM compiled_agents WHERE tenant_id = $1 AND agent_id = $2 AND version = $3`

	sqlPutCompiledAgent = `
INSERT INTO compiled_agents (tenant_id, agent_id, version, sha256, format, size, object_key, body)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (tenant_id, agent_id, version) DO UPDATE
SET sha256 = EXCLUDED.sha256, format = EXCLUDED.format, size = EXCLUDED.size,
    object_key = EXCLUDED.object_key, body = EXCLUDED.body, compiled_at = now()`
)

// CompiledAgent reads the artefact of an agent version: agent.CodeNotFound
// when none is stored, or when its object is gone from the object store
// (the caller compiles it again); agent.CodeUnavailable when the object
// store cannot be reached, or the artefact is kept in one and this
// process has none. The bytes are checked against the row's size and
// hash as they are read.
func (s *Store) CompiledAgent(ctx context.Context, tenantID, agentID string, version int) (CompiledAgent, error) {
	if err := requireKey(tenantID, "agent_id", agentID); err != nil {
		return CompiledAgent{}, err
	}
	var c CompiledAgent
	var sum string
	var size int64
	var key *string
	err := s.pool.QueryRow(ctx, sqlCompiledAgent, tenantID, agentID, version).Scan(&sum, &c.Format, &size, &key, &c.Data, &c.CompiledAt)
	notFound := agent.Errorf(agent.CodeNotFound, "agent %q version %d of tenant %q has no compiled artefact", agentID, version, tenantID)
	if err := oneRow(err, notFound, "read compiled agent %q version %d", agentID, version); err != nil {
		return CompiledAgent{}, err
	}
	c.Ref = agent.CompiledRef(sum)
	if key == nil {
		return c, nil
	}
	c.ObjectKey = *key
	if s.objects == nil {
		return CompiledAgent{}, agent.Errorf(agent.CodeUnavailable, "compiled agent %s is kept in the object store, and this process has none configured (%s)", c.Ref, objstore.EnvBucket)
	}
	r, err := s.objects.Get(ctx, c.ObjectKey, 0, objstore.Digest{Size: size, SHA256: sum})
	if errors.Is(err, objstore.ErrNotFound) {
		return CompiledAgent{}, agent.Errorf(agent.CodeNotFound, "compiled agent %s is gone from the object store", c.Ref)
	}
	if err != nil {
		return CompiledAgent{}, fmt.Errorf("read compiled agent %s: %w", c.Ref, err)
	}
	defer r.Close()
	if c.Data, err = io.ReadAll(r); err != nil {
		return CompiledAgent{}, fmt.Errorf("read compiled agent %s: %w", c.Ref, err)
	}
	return c, nil
}

// PutCompiledAgent keeps data, an agent version compiled in format, as
// the version's artefact, by its SHA-256: its object (CompiledKey) written
// first, when the store has an object store, then the row that names it,
// replacing the version's earlier artefact. Writing the same bytes again
// writes the same object and row. It returns the artefact's ref.
func (s *Store) PutCompiledAgent(ctx context.Context, tenantID, agentID string, version int, format string, data []byte) (string, error) {
	if err := requireKey(tenantID, "agent_id", agentID); err != nil {
		return "", err
	}
	if len(data) > MaxCompiledBytes {
		return "", agent.Errorf(agent.CodeInvalid, "compiled agent %q version %d is %d bytes; the limit is %d", agentID, version, len(data), MaxCompiledBytes)
	}
	sum256 := sha256.Sum256(data)
	sum := hex.EncodeToString(sum256[:])
	ref := agent.CompiledRef(sum)
	var key *string
	body := data
	if s.objects != nil {
		k := CompiledKey(sum)
		md := md5.Sum(data) //nolint:gosec // see the import
		if err := s.objects.Put(ctx, k, bytes.NewReader(data), int64(len(data)), "application/json", md[:]); err != nil {
			return "", fmt.Errorf("store compiled agent %s: %w", ref, err)
		}
		key, body = &k, nil
	}
	_, err := s.pool.Exec(ctx, sqlPutCompiledAgent, tenantID, agentID, version, sum, format, len(data), key, body)
	if err != nil {
		return "", fmt.Errorf("store compiled agent %s: %w", ref, err)
	}
	return ref, nil
}
