package a2a

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
)

// Agent cards: the path's agent's, or the tenant's default agent's.

// serveCard answers the agent card of the path's agent.
func (m *a2aServer) serveCard(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ag, err := m.agent(ctx)
	switch {
	case errors.Is(err, a2a.ErrInvalidRequest):
		writeA2AError(w, http.StatusNotFound, err)
	case err != nil:
		writeA2AError(w, http.StatusServiceUnavailable, err)
	default:
		writeCard(w, a2aCard(ag, a2aRequestOf(ctx).url))
	}
}

// serveDefaultCard answers the card of the tenant's default agent, when
// it is exposed through A2A.
func (m *a2aServer) serveDefaultCard(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	def, err := m.st.DefaultAgent(ctx, gateway.TenantOf(ctx))
	if err != nil {
		writeA2AError(w, http.StatusServiceUnavailable, m.classify(ctx, err, nil))
		return
	}
	req := a2aRequestOf(ctx)
	req.agentID = def
	req.url += def
	ctx = context.WithValue(ctx, a2aRequestKey{}, req)
	ag, err := m.agent(ctx)
	if def == "" || err != nil {
		writeA2AError(w, http.StatusNotFound, fmt.Errorf("the tenant's default agent is not served over A2A: read an agent's card at %s{agent_id}%s: %w",
			A2APrefix, a2asrv.WellKnownAgentCardPath, a2a.ErrInvalidRequest))
		return
	}
	writeCard(w, a2aCard(ag, req.url))
}

func writeCard(w http.ResponseWriter, card *a2a.AgentCard) {
	body, err := a2aCardJSON(card)
	if err != nil {
		writeA2AError(w, http.StatusInternalServerError, fmt.Errorf("the agent card could not be written: %w", a2a.ErrInternalError))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// a2aCard is an agent's card: its id, description (its one skill), its
// endpoint, streaming, and the bearer token it needs.
func a2aCard(ag agent.Agent, url string) *a2a.AgentCard {
	desc := cmp.Or(ag.Description, "The agent "+ag.ID+" of agentflow.")
	modes := []string{"text/plain", "application/json"}
	return &a2a.AgentCard{
		Name: ag.ID, Description: desc, URL: url, Version: fmt.Sprint(ag.Version),
		ProtocolVersion: A2AProtocolVersion, PreferredTransport: a2a.TransportProtocolJSONRPC,
		Capabilities:      a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes: modes, DefaultOutputModes: modes,
		Skills: []a2a.AgentSkill{{ID: ag.ID, Name: ag.ID, Description: desc, Tags: []string{gateway.ServerName}}},
		SecuritySchemes: a2a.NamedSecuritySchemes{a2aSecurityScheme: a2a.HTTPAuthSecurityScheme{
			Scheme: "bearer", Description: "an agentflow API token with the user role"}},
		Security: []a2a.SecurityRequirements{{a2aSecurityScheme: a2a.SecuritySchemeScopes{}}},
	}
}
