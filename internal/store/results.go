package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// resultPayload is the part of a result stored in result_data or, when
// large, as a blob; the rest lives in columns.
type resultPayload struct {
	Output        string          `json:"output,omitempty"`
	ResultPreview json.RawMessage `json:"result_preview,omitempty"`
	// OutputJSON is the result's output_json as text: jsonb would
	// reorder an object's keys, and the answer's order is the model's.
	OutputJSON string `json:"output_json,omitempty"`
	// Blocks are the result's content blocks; a json block's value is
	// OutputJSON's, filled in when the result is read (jsonb would
	// reorder it).
	Blocks []agent.Block `json:"blocks,omitempty"`
	// Partial: the turn was stopped in its answer (agent.TurnResult.Partial).
	Partial bool `json:"partial,omitempty"`
	// Steered: the messages the turn took in (agent.TurnResult.Steered).
	Steered []string `json:"steered,omitempty"`
	// Citations: the chunks the answer cites (agent.TurnResult.Citations).
	Citations []agent.Citation `json:"citations,omitempty"`
}

// storedBlocks are blocks as a result payload keeps them: a json block
// without its value.
func storedBlocks(blocks []agent.Block) []agent.Block {
	if len(blocks) == 0 {
		return nil
	}
	out := make([]agent.Block, len(blocks))
	for i, b := range blocks {
		if b.Type == agent.BlockJSON {
			b.JSON = nil
		}
		out[i] = b
	}
	return out
}

const resultContentType = "application/json"

const (
	sqlInsertResult = `
INSERT INTO agent_results (
  tenant_id, job_id, run_id, node_id, workflow_id, agent_id, agent_version, route_rule,
  protocol_version, result_data, cas_id, status, error, tool_calls, tokens_used, cache_hit,
  execution_time_ms, llm_model, data_ref, session_id, cached_tokens, request_hash, completed_at, channel, build_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, coalesce($23, now()), $24, $25)
ON CONFLICT (tenant_id, job_id) DO NOTHING
RETURNING ` + resultColumns

	resultColumns = `result_id::text, job_id, protocol_version, status, result_data, cas_id, error,
  tool_calls, tokens_used, cache_hit, execution_time_ms, llm_model, agent_id, agent_version, route_rule, data_ref, cached_tokens,
  request_hash, completed_at, channel, session_id`

	sqlResultColumns = `SELECT ` + resultColumns + ` FROM agent_results`

	sqlResultByJob = sqlResultColumns + `
WHERE tenant_id = $1 AND job_id = $2`

	sqlResultByID = sqlResultColumns + `
WHERE tenant_id = $1 AND result_id = $2::uuid`

	// Identical large outputs share one blob; the earliest result wins.
	sqlResultByCAS = sqlResultColumns + `
WHERE tenant_id = $1 AND cas_id = $2
ORDER BY created_at, result_id
LIMIT 1`
)

// SaveResult stores the result of a turn and returns the stored result,
// with ResultRef set. Idempotent: the row is inserted with ON CONFLICT
// (tenant_id, job_id) DO NOTHING and then read back, so a retry or a second
// writer of the same request gets the first result, result_ref included;
// a result stored for another request under the job id is
// agent.CodeConflict, never returned as this request's.
//
// The serialized output and preview go inline in result_data when shorter
// than Options.ResultInlineLimit (ref "artifact://<result_id>"), else into
// cas_blobs (ref "cas://sha256:<hex>"). req is the request the result
// answers: it supplies run_id, node_id, the channel and the request's
// hash.
func (s *Store) SaveResult(ctx context.Context, tenantID, workflowID string, r agent.TurnResult, req agent.TurnRequest) (agent.TurnResult, error) {
	if err := checkResult(tenantID, r, req); err != nil {
		return agent.TurnResult{}, err
	}
	inline, casID, err := s.resultBody(ctx, r)
	if err != nil {
		return agent.TurnResult{}, err
	}
	var errJSON []byte
	if r.Error != nil {
		if errJSON, err = json.Marshal(r.Error); err != nil {
			return agent.TurnResult{}, fmt.Errorf("save result %q: encode error: %w", r.JobID, err)
		}
	}
	toolCalls := r.Metadata.ToolCalls
	if toolCalls == nil {
		toolCalls = []agent.ToolCallRecord{}
	}
	toolCallsJSON, err := json.Marshal(toolCalls)
	if err != nil {
		return agent.TurnResult{}, fmt.Errorf("save result %q: encode tool calls: %w", r.JobID, err)
	}
	version := cmp.Or(r.Version, agent.ProtocolVersion)
	agentID := cmp.Or(r.Metadata.AgentID, req.AgentID)
	hash := req.Hash()
	// The turn's own clock says when it ended (it is in the workflow's
	// history); a result without one is stamped as it is stored.
	var completedAt *time.Time
	if !r.CompletedAt.IsZero() {
		completedAt = &r.CompletedAt
	}
	// The insert returns the row it stored; one that finds a result
	// stored first returns nothing, and that result is read.
	var storedHash string
	stored, err := s.scanResult(ctx, s.pool.QueryRow(ctx, sqlInsertResult,
		tenantID, r.JobID, req.RunID, req.NodeID, workflowID, agentID, r.Metadata.AgentVersion, r.Metadata.RouteRule,
		version, inline, casID, r.Status, errJSON, toolCallsJSON, r.Metadata.TokensUsed, r.Metadata.CacheHit,
		r.Metadata.ExecutionTimeMS, r.Metadata.LLMModel, r.DataRef, req.SessionID, r.Metadata.CachedTokens, hash, completedAt, req.Channel, s.build), &storedHash)
	if errors.Is(err, pgx.ErrNoRows) {
		if stored, storedHash, err = s.result(ctx, tenantID, r.JobID); err != nil {
			return agent.TurnResult{}, fmt.Errorf("save result %q: read back: %w", r.JobID, err)
		}
	} else if err != nil {
		return agent.TurnResult{}, fmt.Errorf("save result %q: %w", r.JobID, err)
	}
	if err := sameRequest(tenantID, r.JobID, storedHash, hash); err != nil {
		return agent.TurnResult{}, err
	}
	return stored, nil
}

// checkResult checks a result before SaveResult stores it: a final
// status, JSON where JSON is due, and a request of the same tenant and
// job.
func checkResult(tenantID string, r agent.TurnResult, req agent.TurnRequest) error {
	if err := requireJobKey(tenantID, r.JobID); err != nil {
		return err
	}
	switch r.Status {
	case agent.StatusCompleted, agent.StatusFailed, agent.StatusRejected, agent.StatusCanceled:
	default:
		return agent.Errorf(agent.CodeInvalid, "result status %q: want %q, %q, %q or %q",
			r.Status, agent.StatusCompleted, agent.StatusFailed, agent.StatusRejected, agent.StatusCanceled)
	}
	if req.TenantID != "" && req.TenantID != tenantID {
		return agent.Errorf(agent.CodeInvalid, "result of tenant %q saved with a request of tenant %q", tenantID, req.TenantID)
	}
	if req.JobID != "" && req.JobID != r.JobID {
		return agent.Errorf(agent.CodeInvalid, "result of job %q saved with a request of job %q", r.JobID, req.JobID)
	}
	if len(r.ResultPreview) > 0 && !json.Valid(r.ResultPreview) {
		return agent.Errorf(agent.CodeInvalid, "result_preview of job %q is not valid JSON", r.JobID)
	}
	if len(r.OutputJSON) > 0 && !json.Valid(r.OutputJSON) {
		return agent.Errorf(agent.CodeInvalid, "output_json of job %q is not valid JSON", r.JobID)
	}
	return nil
}

// resultBody encodes a result's output for SaveResult: inline when
// shorter than Options.ResultInlineLimit, else stored in cas_blobs, whose
// id is returned instead.
func (s *Store) resultBody(ctx context.Context, r agent.TurnResult) ([]byte, *string, error) {
	payload, err := json.Marshal(resultPayload{Output: r.Output, ResultPreview: r.ResultPreview, OutputJSON: string(r.OutputJSON),
		Blocks: storedBlocks(r.Blocks), Partial: r.Partial, Steered: r.Steered, Citations: r.Citations})
	if err != nil {
		return nil, nil, fmt.Errorf("save result %q: encode: %w", r.JobID, err)
	}
	var inline []byte
	var casID *string
	if len(payload) < s.inlineLimit {
		inline = payload
	} else {
		// A blob left behind by a failed insert is harmless: blobs are
		// content-addressed and the retry reuses it.
		sum, err := s.putBlob(ctx, payload, resultContentType)
		if err != nil {
			return nil, nil, fmt.Errorf("save result %q: %w", r.JobID, err)
		}
		casID = &sum
	}
	return inline, casID, nil
}

// Result returns the stored result of a job; agent.CodeNotFound when absent.
func (s *Store) Result(ctx context.Context, tenantID, jobID string) (agent.TurnResult, error) {
	r, _, err := s.result(ctx, tenantID, jobID)
	return r, err
}

// ResultOf returns the stored result of the job req names, if it answers
// req: agent.CodeNotFound when the job has no result, agent.CodeConflict
// when its result answers another request (agent.TurnRequest.Hash).
// Results stored before requests were hashed answer any request.
func (s *Store) ResultOf(ctx context.Context, req agent.TurnRequest) (agent.TurnResult, error) {
	r, storedHash, err := s.result(ctx, req.TenantID, req.JobID)
	if err != nil {
		return agent.TurnResult{}, err
	}
	if err := sameRequest(req.TenantID, req.JobID, storedHash, req.Hash()); err != nil {
		return agent.TurnResult{}, err
	}
	return r, nil
}

// TurnStart reads what a turn needs before it claims its job, in one
// round trip: agentID's active version (as ActiveAgent) and the job's
// stored result, when it has one (as ResultOf: CodeConflict when that is
// another request's).
func (s *Store) TurnStart(ctx context.Context, req agent.TurnRequest, agentID string) (agent.Agent, *agent.TurnResult, error) {
	if err := requireKey(req.TenantID, "agent_id", agentID); err != nil {
		return agent.Agent{}, nil, err
	}
	if err := requireJobKey(req.TenantID, req.JobID); err != nil {
		return agent.Agent{}, nil, err
	}
	b := &pgx.Batch{}
	b.Queue(sqlActiveAgent, req.TenantID, agentID)
	b.Queue(sqlResultByJob, req.TenantID, req.JobID)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	a, agentErr := scanAgent(br.QueryRow())
	var hash string
	r, err := s.scanResult(ctx, br.QueryRow(), &hash)
	switch {
	case err == nil:
		if err := sameRequest(req.TenantID, req.JobID, hash, req.Hash()); err != nil {
			return agent.Agent{}, nil, err
		}
		return agent.Agent{}, &r, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return agent.Agent{}, nil, fmt.Errorf("look up result of job %q: %w", req.JobID, err)
	case errors.Is(agentErr, pgx.ErrNoRows):
		return agent.Agent{}, nil, agent.Errorf(agent.CodeNotFound, "agent %q of tenant %q not found", agentID, req.TenantID)
	case agentErr != nil:
		return agent.Agent{}, nil, fmt.Errorf("load agent %q: %w", agentID, agentErr)
	}
	return a, nil, nil
}

// sameRequest refuses a job's stored result for a request with another
// hash; a result stored without one ("") is accepted.
func sameRequest(tenantID, jobID, stored, hash string) error {
	if stored != "" && stored != hash {
		return agent.Errorf(agent.CodeConflict, "job id %q of tenant %q names another request, which has a result; use a new job id", jobID, tenantID)
	}
	return nil
}

// result is Result with the hash of the request the result answers.
func (s *Store) result(ctx context.Context, tenantID, jobID string) (agent.TurnResult, string, error) {
	if err := requireJobKey(tenantID, jobID); err != nil {
		return agent.TurnResult{}, "", err
	}
	var hash string
	r, err := s.scanResult(ctx, s.pool.QueryRow(ctx, sqlResultByJob, tenantID, jobID), &hash)
	if err := oneRow(err, agent.Errorf(agent.CodeNotFound, "result of job %q of tenant %q not found", jobID, tenantID), "load result of job %q", jobID); err != nil {
		return agent.TurnResult{}, "", err
	}
	return r, hash, nil
}

// ResultByRef returns the result an "artifact://<result_id>" or
// "cas://sha256:<hex>" ref points at, among the tenant's results. A ref of
// another tenant is agent.CodeNotFound, like a ref that points nowhere, so
// that refs do not reveal what other tenants stored; a malformed ref is
// agent.CodeInvalid.
func (s *Store) ResultByRef(ctx context.Context, tenantID, ref string) (agent.TurnResult, error) {
	if err := requireID("tenant_id", tenantID); err != nil {
		return agent.TurnResult{}, err
	}
	var row pgx.Row
	switch {
	case strings.HasPrefix(ref, artifactRefPrefix):
		id := strings.TrimPrefix(ref, artifactRefPrefix)
		if !isUUID(id) {
			return agent.TurnResult{}, agent.Errorf(agent.CodeInvalid, "ref %q: want %s<result uuid>", words.Clip(ref, 100), artifactRefPrefix)
		}
		row = s.pool.QueryRow(ctx, sqlResultByID, tenantID, id)
	case strings.HasPrefix(ref, "cas://"):
		sum, err := parseCASRef(ref)
		if err != nil {
			return agent.TurnResult{}, err
		}
		row = s.pool.QueryRow(ctx, sqlResultByCAS, tenantID, sum)
	default:
		return agent.TurnResult{}, agent.Errorf(agent.CodeInvalid, "ref %q: want %s… or %s…", words.Clip(ref, 100), artifactRefPrefix, casRefPrefix)
	}
	var hash string
	r, err := s.scanResult(ctx, row, &hash)
	if err := oneRow(err, agent.Errorf(agent.CodeNotFound, "result %s of tenant %q not found", ref, tenantID), "load result %s", ref); err != nil {
		return agent.TurnResult{}, err
	}
	return r, nil
}

// scanResult reads a row of sqlResultColumns, fetching the payload from
// cas_blobs when it is not inline; hash receives the hash of the request
// the result answers.
func (s *Store) scanResult(ctx context.Context, row pgx.Row, hash *string) (agent.TurnResult, error) {
	var (
		r                         agent.TurnResult
		resultID                  string
		inline, errJSON, toolJSON []byte
		casID                     *string
		completedAt               *time.Time
	)
	m := &r.Metadata
	err := row.Scan(&resultID, &r.JobID, &r.Version, &r.Status, &inline, &casID, &errJSON,
		&toolJSON, &m.TokensUsed, &m.CacheHit, &m.ExecutionTimeMS, &m.LLMModel, &m.AgentID, &m.AgentVersion, &m.RouteRule, &r.DataRef, &m.CachedTokens, hash, &completedAt, &r.Channel, &r.SessionID)
	if err != nil {
		return agent.TurnResult{}, err
	}
	if completedAt != nil {
		r.CompletedAt = completedAt.UTC()
	}
	switch {
	case inline != nil:
		r.ResultRef = artifactRefPrefix + resultID
	case casID != nil:
		r.ResultRef = casRefPrefix + *casID
		if inline, err = s.blob(ctx, *casID); err != nil {
			return agent.TurnResult{}, err
		}
	default:
		// s3_ref is reserved for an external store this build does not have.
		return agent.TurnResult{}, agent.Errorf(agent.CodeInternal, "result %s is stored externally, which this build cannot read", resultID)
	}
	var p resultPayload
	if err := json.Unmarshal(inline, &p); err != nil {
		return agent.TurnResult{}, fmt.Errorf("decode result data: %w", err)
	}
	r.Output, r.ResultPreview, r.Blocks, r.Partial, r.Steered, r.Citations = p.Output, p.ResultPreview, p.Blocks, p.Partial, p.Steered, p.Citations
	if p.OutputJSON != "" {
		r.OutputJSON = json.RawMessage(p.OutputJSON)
	}
	for i := range r.Blocks {
		if r.Blocks[i].Type == agent.BlockJSON {
			r.Blocks[i].JSON = r.OutputJSON
		}
	}
	if errJSON != nil {
		r.Error = &agent.TurnError{}
		if err := json.Unmarshal(errJSON, r.Error); err != nil {
			return agent.TurnResult{}, fmt.Errorf("decode result error: %w", err)
		}
	}
	if err := json.Unmarshal(toolJSON, &m.ToolCalls); err != nil {
		return agent.TurnResult{}, fmt.Errorf("decode tool calls: %w", err)
	}
	return r, nil
}

// isUUID reports whether s is a UUID in its canonical textual form.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
				return false
			}
		}
	}
	return true
}

// Data returns the data a ref names, as a tool reads it by ref: the bytes
// of a cas:// blob the tenant stored, or, for a turn's result
// (artifact://), the data its answer rests on (DataRef) or else its text
// as a JSON string. Refs of other tenants are agent.CodeNotFound.
func (s *Store) Data(ctx context.Context, tenantID, ref string) ([]byte, error) {
	if strings.HasPrefix(ref, casRefPrefix) {
		if data, _, err := s.TenantBlob(ctx, tenantID, ref); err == nil || !agent.IsCode(err, agent.CodeNotFound) {
			return data, err
		}
		// A large result's payload is a blob too, read as a result.
	}
	res, err := s.ResultByRef(ctx, tenantID, ref)
	if err != nil {
		return nil, err
	}
	if res.DataRef != "" {
		data, _, err := s.TenantBlob(ctx, tenantID, res.DataRef)
		return data, err
	}
	text, err := json.Marshal(res.Output)
	if err != nil {
		return nil, fmt.Errorf("encode result %s: %w", ref, err)
	}
	return text, nil
}

const sqlSessionData = `
SELECT job_id, data_ref, coalesce(result_data->'result_preview', 'null'::jsonb)
FROM agent_results
WHERE tenant_id = $1 AND session_id = $2 AND data_ref <> ''
ORDER BY created_at DESC LIMIT $3`

// SessionDatum is data an earlier turn of a session produced.
type SessionDatum struct {
	JobID   string
	Ref     string
	Preview json.RawMessage
}

// SessionData returns the data the latest n turns of a session produced,
// newest first, for the model to use by reference. (Results large enough
// to be stored as blobs keep no preview here.)
func (s *Store) SessionData(ctx context.Context, tenantID, sessionID string, n int) ([]SessionDatum, error) {
	if err := requireID("tenant_id", tenantID); err != nil {
		return nil, err
	}
	out, err := collect(ctx, s.pool, func(row pgx.CollectableRow) (SessionDatum, error) {
		var d SessionDatum
		var preview []byte
		err := row.Scan(&d.JobID, &d.Ref, &preview)
		if string(preview) != "null" {
			d.Preview = preview
		}
		return d, err
	}, sqlSessionData, tenantID, sessionID, n)
	if err != nil {
		return nil, fmt.Errorf("load data of session %q: %w", sessionID, err)
	}
	return out, nil
}
