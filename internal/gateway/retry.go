package gateway

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/redact"
	"github.com/agentflow/agentflow/internal/store"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// "Try again from here" on the turn page: a new turn that replays a
// recorded one (agent.Replay) — the model is called afresh at every step,
// every tool call is answered from the recording, none runs, no approval
// is asked — with what the person edited: the prompt, the model, the
// agent's version, and the results of some recorded calls.
//
//	POST /v1/turn/{tenant}/{job}/retry   {"seq","prompt","model","agent_version","results"}
//	→ 200 {"stream_id","job_id","session_id"}
//
// Authorized as Start (role user): a retry starts a turn. {tenant} must
// be the caller's and a person's turn needs a staff role (OwnStream):
// anything else is not found, as a turn that does not exist. The turn
// starts as the Start RPC's do (Prepare, then StartPrepared), on
// channel retry, so that the job-id rules, routing, the agent check,
// the tenant's intake (PII redaction of what the person typed, the
// edited results too), budgets and rate limits all apply. A turn of a
// session is retried in a fork of the session made before it (its
// forked_from and forked_at_job say so: GET
// /v1/conversations/{session}/forks), whose history the retry loads.
const retryPath = "/v1/turn/{tenant}/{job}/retry"

// retryBody is the body of a retry: Seq is required, the rest replaces
// what the recorded turn had when set.
type retryBody struct {
	Seq          int
	Prompt       string
	Model        string
	AgentVersion int
	Results      []agent.ReplayResult
}

// RetryStarted is the answer to a retry: the new turn, and the forked
// session it runs in (none for a turn of no session).
type RetryStarted struct {
	StreamID  string `json:"stream_id"`
	JobID     string `json:"job_id"`
	SessionID string `json:"session_id,omitempty"`
}

func (a *HTTPAPI) registerRetry(mux *http.ServeMux) {
	mux.HandleFunc("POST "+retryPath, a.retry)
	a.RefuseOtherMethods(mux, retryPath)
}

func (a *HTTPAPI) retry(w http.ResponseWriter, r *http.Request) {
	r, ok := a.Authorized(w, r, pb.AgentService_Start_FullMethodName)
	if !ok {
		return
	}
	ctx := r.Context()
	tenant, job := r.PathValue("tenant"), r.PathValue("job")
	if err := onlyParams(r.URL.Query()); err != nil {
		a.Refuse(w, r, err)
		return
	}
	if tenant != CallerOf(ctx).Tenant || OwnStream(ctx, contract.TurnWorkflowID(tenant, job)) != nil {
		a.Refuse(w, r, agent.Errorf(agent.CodeNotFound, "turn %q not found", Clip(job)))
		return
	}
	body, err := readRetryBody(r)
	if err != nil {
		a.Refuse(w, r, err)
		return
	}
	out, err := a.svc.forChannel(agent.ChannelRetry).retryTurn(ctx, job, body)
	if err != nil {
		a.Refuse(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, out)
}

// readRetryBody reads a retry's body strictly: a JSON object of the known
// members only, each of its type, seq required.
func readRetryBody(r *http.Request) (retryBody, error) {
	data, err := ReadBody(r)
	if err != nil {
		return retryBody{}, err
	}
	fields, err := JSONObject("body", data, []string{"seq", "prompt", "model", "agent_version", "results"})
	if err != nil {
		return retryBody{}, err
	}
	if _, ok := fields["seq"]; !ok {
		return retryBody{}, agent.Errorf(agent.CodeInvalid, "body.seq is required: the step to try again from")
	}
	var b retryBody
	for _, m := range []struct {
		name, want string
		v          any
	}{
		{"seq", "an integer", &b.Seq}, {"prompt", "a string", &b.Prompt}, {"model", "a string", &b.Model},
		{"agent_version", "an integer", &b.AgentVersion},
		{"results", `a list of {"call_id", "result"}`, &b.Results},
	} {
		if err := JSONMember(fields, m.name, "body", m.want, m.v); err != nil {
			return retryBody{}, err
		}
	}
	if b.AgentVersion < 0 {
		return retryBody{}, agent.Errorf(agent.CodeInvalid, "body.agent_version is %d: want a version (1 or more), or none", b.AgentVersion)
	}
	return b, nil
}

// retryTurn starts the retry of the caller's tenant's turn job (see
// retryPath) on s's channel, which is ChannelRetry.
func (s *Service) retryTurn(ctx context.Context, job string, b retryBody) (RetryStarted, error) {
	if s.store == nil {
		return RetryStarted{}, agent.Errorf(agent.CodeUnavailable, "retries are not served by this gateway: it has no store")
	}
	tenant := CallerOf(ctx).Tenant
	orig, err := s.store.Turn(ctx, tenant, job)
	if err != nil {
		return RetryStarted{}, err
	}
	in, fork := retryRequest(orig, b)
	if fork != nil {
		if err := ownPerson(ctx, "session", fork.From); err != nil {
			return RetryStarted{}, err
		}
		fork.TenantID = tenant
	}
	// The prompt and the model go through the Start RPC's own checks and
	// intake; the replay is added after, as no client's request names
	// one.
	req, err := s.Prepare(ctx, in)
	if err != nil {
		return RetryStarted{}, err
	}
	rep := &agent.Replay{JobID: job, Seq: b.Seq, Results: b.Results}
	if err := rep.Validate(); err != nil {
		return RetryStarted{}, err
	}
	// The edited results are what a person typed: the tenant's intake
	// redacts them as it did the prompt, in the turn's scope.
	texts := make([]*string, len(rep.Results))
	for i := range rep.Results {
		texts[i] = &rep.Results[i].Result
	}
	if err := s.redact(ctx, req.TenantID, redact.Scope(req.SessionID, req.JobID), texts...); err != nil {
		return RetryStarted{}, err
	}
	req.Replay = rep
	if err := req.Validate(); err != nil {
		return RetryStarted{}, err
	}
	if fork != nil {
		if _, _, err := s.store.ForkSession(ctx, *fork); err != nil {
			return RetryStarted{}, err
		}
	}
	run, err := s.StartPrepared(ctx, req)
	if err != nil {
		return RetryStarted{}, err
	}
	return RetryStarted{StreamID: run.GetID(), JobID: req.JobID, SessionID: req.SessionID}, nil
}

// retryRequest is the request of a retry of orig, as a client's Start
// would send it, and the fork of orig's session the retry runs in (nil
// for a turn of no session): the agent and version orig ran, its prompt,
// parts, model, output schema and timeout, each replaced by b's edits.
// Its deliver targets, notify and process ids are left out: a retry is
// looked at on the turn page, never pushed anywhere.
func retryRequest(orig store.Turn, b retryBody) (*pb.TurnRequest, *store.Fork) {
	o := orig.Request
	in := &pb.TurnRequest{
		AgentId: orig.AgentID, AgentVersion: int32(orig.AgentVersion),
		Prompt: o.Prompt, Model: o.Model, TimeoutSec: int32(o.TimeoutSec),
	}
	if b.AgentVersion > 0 {
		in.AgentVersion = int32(b.AgentVersion)
	}
	if b.Prompt != "" {
		in.Prompt = b.Prompt
	}
	if b.Model != "" {
		in.Model = b.Model
	}
	if len(o.OutputSchema) > 0 {
		in.OutputSchemaJson = string(o.OutputSchema)
	}
	for _, p := range o.Parts {
		in.Parts = append(in.Parts, &pb.Part{Type: p.Type, Text: p.Text, Url: p.URL, MimeType: p.MIMEType, Name: p.Name})
	}
	if orig.SessionID == "" {
		return in, nil
	}
	id := NewJobID()
	f := &store.Fork{From: orig.SessionID, JobID: orig.JobID, Before: true,
		To: fmt.Sprintf("%.150s-retry-%s", strings.TrimPrefix(orig.SessionID, agent.DerivedPrefix), id[len(id)-8:])}
	in.SessionId, in.History = f.To, agent.HistoryLoad
	return in, f
}
