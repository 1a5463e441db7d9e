package gateway

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/timeline"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// A turn's timeline (internal/timeline): its steps with their times,
// costs, approvals and runs, a page at a time, and what one of its model
// calls read.
//
//	GET /v1/turn/{tenant}/{job}/timeline[?after=&limit=]        timeline.Timeline
//	GET /v1/turn/{tenant}/{job}/timeline/steps/{seq}/request    timeline.Request
//
// Both are authorized as ListEvents (role user): who may follow a turn's
// events may read its timeline. {tenant} must be the caller's, and a
// person's turn needs a staff role (OwnStream): anything else is not
// found, exactly as a turn that does not exist. The system prompt of a
// request is shown to the admin role only.
const (
	TimelinePath        = "/v1/turn/{tenant}/{job}/timeline"
	timelineRequestPath = "/v1/turn/{tenant}/{job}/timeline/steps/{seq}/request"
)

// TimelineOptions link a turn's timeline to the places an operator
// keeps (timeline.Links). Each default is none.
type TimelineOptions struct {
	// WebUIURL is the Temporal Web UI's base URL, where each run links
	// to its history (env AGENTFLOW_WEB_UI_URL); Namespace is the turns'
	// namespace, which the links name.
	WebUIURL, Namespace string
	// TraceURL is a trace viewer's link with {workflow_id} and {run_id}
	// in it (env AGENTFLOW_TRACE_URL).
	TraceURL string
}

func (a *HTTPAPI) registerTimeline(mux *http.ServeMux) {
	h := timelineRoutes{a: a}
	mux.HandleFunc("GET "+TimelinePath, h.timeline)
	mux.HandleFunc("GET "+timelineRequestPath, h.request)
	a.RefuseOtherMethods(mux, TimelinePath, timelineRequestPath)
}

// timelineRoutes serve a turn's timeline: each reads its request,
// builds the answer and writes it.
type timelineRoutes struct{ a *HTTPAPI }

// turn authorizes r and checks that its turn is the caller's to read,
// and its query parameters: the caller's request, tenant and job.
func (h timelineRoutes) turn(w http.ResponseWriter, r *http.Request, params ...string) (_ *http.Request, tenant, job string, ok bool) {
	r, ok = h.a.Authorized(w, r, pb.AgentService_ListEvents_FullMethodName)
	if !ok {
		return nil, "", "", false
	}
	ctx := r.Context()
	tenant, job = r.PathValue("tenant"), r.PathValue("job")
	if OwnStream(ctx, contract.TurnWorkflowID(tenant, job)) != nil {
		// The store's own words for a turn it does not have.
		h.a.Refuse(w, r, agent.Errorf(agent.CodeNotFound, "turn %q not found", job))
		return nil, "", "", false
	}
	if err := onlyParams(r.URL.Query(), params...); err != nil {
		h.a.Refuse(w, r, err)
		return nil, "", "", false
	}
	if h.a.svc.store == nil {
		h.a.Refuse(w, r, agent.Errorf(agent.CodeUnavailable, "turn timelines are not served by this gateway: it has no store"))
		return nil, "", "", false
	}
	return r, tenant, job, true
}

// source is where the gateway's timelines come from.
func (h timelineRoutes) source() timeline.Source {
	svc := h.a.svc
	src := timeline.Source{Store: svc.store, TraceURL: svc.timeline.TraceURL, Logger: svc.logger}
	if svc.client != nil {
		src.Runs = timeline.TemporalRuns{Client: svc.client, Namespace: svc.timeline.Namespace, WebUI: svc.timeline.WebUIURL}
	}
	return src
}

func (h timelineRoutes) timeline(w http.ResponseWriter, r *http.Request) {
	r, tenant, job, ok := h.turn(w, r, "after", "limit")
	if !ok {
		return
	}
	q := timeline.Query{TenantID: tenant, JobID: job, After: -1}
	var err error
	if q.After, err = timelineParam(r, "after", -1, -1, 1<<30, "-1 (from the start) or a step's seq"); err == nil {
		q.Limit, err = timelineParam(r, "limit", 0, 1, timeline.MaxLimit, fmt.Sprintf("1 to %d", timeline.MaxLimit))
	}
	if err != nil {
		h.a.Refuse(w, r, err)
		return
	}
	out, err := timeline.Build(r.Context(), h.source(), q)
	if err != nil {
		h.a.Refuse(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, out)
}

func (h timelineRoutes) request(w http.ResponseWriter, r *http.Request) {
	r, tenant, job, ok := h.turn(w, r)
	if !ok {
		return
	}
	seq, err := strconv.Atoi(r.PathValue("seq"))
	if err != nil || seq < 0 {
		h.a.Refuse(w, r, agent.Errorf(agent.CodeInvalid, "step %s: want a step's seq, 0 or more", Clip(r.PathValue("seq"))))
		return
	}
	q := timeline.RequestQuery{TenantID: tenant, JobID: job, Seq: seq, Admin: CallerOf(r.Context()).Has(RoleAdmin)}
	out, err := timeline.BuildRequest(r.Context(), h.a.svc.store, q)
	if err != nil {
		h.a.Refuse(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, out)
}

// timelineParam is the query parameter name as a number from least to most,
// def when it is absent; want says what it may be.
func timelineParam(r *http.Request, name string, def, least, most int, want string) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < least || n > most {
		return 0, agent.Errorf(agent.CodeInvalid, "%s %s: want %s", name, Clip(v), want)
	}
	return n, nil
}
