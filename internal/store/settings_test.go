package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/store"
)

func TestRoutingRules(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	listen, err := pgx.Connect(ctx, s.Pool().Config().ConnConfig.ConnString())
	require.NoError(t, err)
	defer listen.Close(context.Background())
	_, err = listen.Exec(ctx, "LISTEN "+store.CatalogChannel)
	require.NoError(t, err)
	notified := func() string {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		n, err := listen.WaitForNotification(wctx)
		if err != nil {
			return ""
		}
		return n.Payload
	}

	ag := func(id string) agent.Agent { return agent.Agent{ID: id, Model: "openai:gpt-4o-mini"} }
	cat := agent.TenantCatalog{TenantID: "rt", DefaultAgent: "general", Agents: []agent.Agent{ag("general"), ag("billing")},
		ReplaceRules: true, Rules: []agent.Rule{
			{Name: "billing-page", Priority: 10, Condition: `ui_page == "billing"`, AgentID: "billing"},
			{Name: "admins", Priority: 20, Condition: `"admin" in caller.roles`, AgentID: "general"},
		}}
	apply := func(c agent.TenantCatalog) store.ApplyReport {
		r, err := s.ApplyCatalog(ctx, agent.Catalog{Tenants: []agent.TenantCatalog{c}}, false)
		require.NoError(t, err)
		return r
	}
	apply(cat)
	require.Equal(t, "rt", notified())
	r, err := s.TenantSettings(ctx, "rt")
	require.NoError(t, err)
	require.Equal(t, "general", r.DefaultAgent)
	require.Equal(t, []string{"admins", "billing-page"}, []string{r.Rules[0].Name, r.Rules[1].Name}, "priority order")
	v1 := r.Version

	// The same document changes nothing: no new version, no notification.
	for _, c := range apply(cat).Changes {
		require.Equal(t, store.ActionUnchanged, c.Action, "%+v", c)
	}
	require.Equal(t, "", notified())
	r, _ = s.TenantSettings(ctx, "rt")
	require.Equal(t, v1, r.Version)

	cat.Rules = []agent.Rule{{Name: "billing-page", Priority: 30, Condition: `ui_page.startsWith("billing")`, AgentID: "billing"}}
	var actions []string
	for _, c := range apply(cat).Changes {
		if c.Kind == store.KindRule {
			actions = append(actions, c.Name+":"+c.Action)
		}
	}
	require.Equal(t, []string{"billing-page:updated", "admins:deleted"}, actions)
	require.Equal(t, "rt", notified())
	r, _ = s.TenantSettings(ctx, "rt")
	require.Equal(t, v1+1, r.Version)
	require.Len(t, r.Rules, 1)

	// A document without rules leaves them.
	apply(agent.TenantCatalog{TenantID: "rt", Agents: []agent.Agent{ag("general")}})
	r, _ = s.TenantSettings(ctx, "rt")
	require.Len(t, r.Rules, 1)

	bad := []agent.TenantCatalog{
		{TenantID: "rt", ReplaceRules: true, Rules: []agent.Rule{{Name: "x", Condition: "true", AgentID: "nobody"}}},
	}
	for _, c := range bad {
		_, err := s.ApplyCatalog(ctx, agent.Catalog{Tenants: []agent.TenantCatalog{c}}, false)
		require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
	}
	r2, _ := s.TenantSettings(ctx, "rt")
	require.Equal(t, r, r2, "a refused document changes nothing")

	_, err = s.TenantSettings(ctx, "nobody")
	require.True(t, agent.IsCode(err, agent.CodeNotFound))
}
