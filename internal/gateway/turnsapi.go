package gateway

import (
	"encoding/base64"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/words"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// The list of recent turns, and a conversation's forks, from the store:
//
//	GET /v1/turns[?agent_id=&status=&channel=&session_id=&since=&until=&min_cost=&limit=&before=]
//	    → {"turns": [TurnSummary…], "next": cursor}
//	GET /v1/conversations/{session}/forks → {"forks": [SessionFork…]}
//
// Both are the caller's tenant's, authorized as ListEvents (role user);
// a person's turns and sessions need a staff role, and are left out of
// the list (or not found) for anyone else. POST /v1/turns stays the
// grpc-gateway's: the root mux's "GET /v1/turns" takes GET (and HEAD)
// only, so any other method still falls through to "/".
const (
	TurnsPath     = "/v1/turns"
	turnForksPath = "/v1/conversations/{session}/forks"
)

// A page of turns: defaultTurnsPage without a limit, at most
// store.MaxTurnRows.
const defaultTurnsPage = 50

// promptShown is how much of a turn's prompt the list shows.
const promptShown = 200

// turnStatuses are the statuses a list may filter by.
var turnStatuses = []string{store.StatusRunning, agent.StatusCompleted, agent.StatusFailed, agent.StatusRejected, agent.StatusCanceled}

// TurnSummary is a turn as GET /v1/turns shows it.
type TurnSummary struct {
	StreamID     string     `json:"stream_id"`
	JobID        string     `json:"job_id"`
	AgentID      string     `json:"agent_id"`
	AgentVersion int        `json:"agent_version"`
	SessionID    string     `json:"session_id,omitempty"`
	Channel      string     `json:"channel"`
	Status       string     `json:"status"`
	Prompt       string     `json:"prompt"`
	StartedAt    time.Time  `json:"started_at"`
	EndedAt      *time.Time `json:"ended_at,omitempty"`
	ModelCalls   int        `json:"model_calls"`
	ToolCalls    int        `json:"tool_calls"`
	InputTokens  int64      `json:"input_tokens"`
	OutputTokens int64      `json:"output_tokens"`
	CostUSD      float64    `json:"cost_usd"`
}

// TurnSummaries is the answer to GET /v1/turns: Next, when set, is the
// before of the next page.
type TurnSummaries struct {
	Turns []TurnSummary `json:"turns"`
	Next  string        `json:"next,omitempty"`
}

// SessionForks is the answer to GET /v1/conversations/{session}/forks.
type SessionForks struct {
	Forks []SessionFork `json:"forks"`
}

// SessionFork is a session forked from another, at one of its turns.
type SessionFork struct {
	SessionID   string    `json:"session_id"`
	ForkedAtJob string    `json:"forked_at_job"`
	CreatedAt   time.Time `json:"created_at"`
}

func (a *HTTPAPI) registerTurnList(mux *http.ServeMux) {
	mux.HandleFunc("GET "+TurnsPath, a.turnList)
	mux.HandleFunc("GET "+turnForksPath, a.turnForks)
	a.RefuseOtherMethods(mux, turnForksPath)
}

func (a *HTTPAPI) turnList(w http.ResponseWriter, r *http.Request) {
	r, ok := a.Authorized(w, r, pb.AgentService_ListEvents_FullMethodName)
	if !ok {
		return
	}
	ctx := r.Context()
	f, err := turnFilter(r.URL.Query())
	if err == nil && a.svc.store == nil {
		err = agent.Errorf(agent.CodeUnavailable, "the list of turns is not served by this gateway: it has no store")
	}
	if err == nil && f.SessionID != "" {
		err = ownPerson(ctx, "session", f.SessionID)
	}
	if err != nil {
		a.Refuse(w, r, err)
		return
	}
	f.TenantID = TenantOf(ctx)
	if !CallerOf(ctx).Staff() {
		f.HideJobPrefixes = agent.PersonIDPrefixes()
	}
	rows, err := a.svc.store.TurnList(ctx, f)
	if err != nil {
		a.Refuse(w, r, err)
		return
	}
	out := TurnSummaries{Turns: make([]TurnSummary, len(rows))}
	for i, t := range rows {
		out.Turns[i] = TurnSummary{StreamID: contract.TurnWorkflowID(f.TenantID, t.JobID), JobID: t.JobID,
			AgentID: t.AgentID, AgentVersion: t.AgentVersion, SessionID: t.SessionID, Channel: t.Channel, Status: t.Status,
			Prompt: words.Clip(t.Prompt, promptShown), StartedAt: t.StartedAt, EndedAt: t.EndedAt,
			ModelCalls: t.ModelCalls, ToolCalls: t.ToolCalls, InputTokens: t.InputTokens, OutputTokens: t.OutputTokens, CostUSD: t.CostUSD}
	}
	if len(rows) == f.Limit {
		last := rows[len(rows)-1]
		out.Next = encodeTurnCursor(store.TurnCursor{CreatedAt: last.StartedAt, JobID: last.JobID})
	}
	WriteJSON(w, http.StatusOK, out)
}

// turnFilter reads a list's query: each parameter known, given once, and
// of its kind.
func turnFilter(q url.Values) (store.TurnFilter, error) {
	if err := onlyParams(q, "agent_id", "status", "channel", "session_id", "since", "until", "min_cost", "limit", "before"); err != nil {
		return store.TurnFilter{}, err
	}
	f := store.TurnFilter{AgentID: q.Get("agent_id"), Status: q.Get("status"), Channel: q.Get("channel"),
		SessionID: q.Get("session_id"), Limit: defaultTurnsPage}
	if f.Status != "" && !slices.Contains(turnStatuses, f.Status) {
		return f, agent.Errorf(agent.CodeInvalid, "status %s: want one of %s", Clip(f.Status), strings.Join(turnStatuses, ", "))
	}
	if f.Channel != "" && !agent.KnownChannel(f.Channel) {
		return f, agent.Errorf(agent.CodeInvalid, "channel %s is not a channel", Clip(f.Channel))
	}
	var err error
	for _, t := range []struct {
		name string
		at   *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := q.Get(t.name); v != "" {
			if *t.at, err = time.Parse(time.RFC3339Nano, v); err != nil {
				return f, agent.Errorf(agent.CodeInvalid, "%s %s: want an RFC 3339 time, e.g. 2025-01-31T09:00:00Z", t.name, Clip(v))
			}
		}
	}
	if v := q.Get("min_cost"); v != "" {
		if f.MinCost, err = strconv.ParseFloat(v, 64); err != nil || f.MinCost < 0 || math.IsInf(f.MinCost, 0) || math.IsNaN(f.MinCost) {
			return f, agent.Errorf(agent.CodeInvalid, "min_cost %s: want a cost in USD, 0 or more", Clip(v))
		}
	}
	if v := q.Get("limit"); v != "" {
		if f.Limit, err = strconv.Atoi(v); err != nil || f.Limit < 1 || f.Limit > store.MaxTurnRows {
			return f, agent.Errorf(agent.CodeInvalid, "limit %s: want 1 to %d", Clip(v), store.MaxTurnRows)
		}
	}
	if v := q.Get("before"); v != "" {
		c, err := decodeTurnCursor(v)
		if err != nil {
			return f, err
		}
		f.Before = &c
	}
	return f, nil
}

// A cursor is opaque to clients: the last row's start (RFC 3339, to the
// nanosecond) and job id, base64url. Only a cursor a page gave decodes.
func encodeTurnCursor(c store.TurnCursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.CreatedAt.UTC().Format(time.RFC3339Nano) + "\n" + c.JobID))
}

func decodeTurnCursor(v string) (store.TurnCursor, error) {
	bad := agent.Errorf(agent.CodeInvalid, "before %s is not a cursor a page of turns gave: pass its next as it is", Clip(v))
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return store.TurnCursor{}, bad
	}
	at, job, ok := strings.Cut(string(raw), "\n")
	if !ok || job == "" {
		return store.TurnCursor{}, bad
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return store.TurnCursor{}, bad
	}
	return store.TurnCursor{CreatedAt: t, JobID: job}, nil
}

func (a *HTTPAPI) turnForks(w http.ResponseWriter, r *http.Request) {
	r, ok := a.Authorized(w, r, pb.AgentService_ListEvents_FullMethodName)
	if !ok {
		return
	}
	ctx := r.Context()
	session := r.PathValue("session")
	err := onlyParams(r.URL.Query())
	if err == nil && a.svc.store == nil {
		err = agent.Errorf(agent.CodeUnavailable, "forks are not served by this gateway: it has no store")
	}
	if err == nil {
		err = ownPerson(ctx, "session", session)
	}
	if err != nil {
		a.Refuse(w, r, err)
		return
	}
	forks, err := a.svc.store.Forks(ctx, TenantOf(ctx), session)
	if err != nil {
		a.Refuse(w, r, err)
		return
	}
	out := SessionForks{Forks: make([]SessionFork, len(forks))}
	for i, f := range forks {
		out.Forks[i] = SessionFork{SessionID: f.SessionID, ForkedAtJob: f.ForkedAtJob, CreatedAt: f.CreatedAt}
	}
	WriteJSON(w, http.StatusOK, out)
}
