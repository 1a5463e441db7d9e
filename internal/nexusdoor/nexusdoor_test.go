package nexusdoor

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/nexus-rpc/sdk-go/nexus"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

var roles = []string{"user", "approver", "admin"}

func TestParseBindings(t *testing.T) {
	for _, tc := range []struct {
		name, in, err string
		want          []Binding
	}{
		{name: "none", in: ""},
		{name: "one", in: "agents-acme=acme:user+approver:billing",
			want: []Binding{{TaskQueue: "agents-acme", TenantID: "acme", Roles: []string{"user", "approver"}, Name: "billing"}}},
		{name: "two, no roles", in: "a=acme, b=beta",
			want: []Binding{{TaskQueue: "a", TenantID: "acme"}, {TaskQueue: "b", TenantID: "beta"}}},
		{name: "no tenant", in: "a=", err: "want <task_queue>=<tenant>"},
		{name: "no queue", in: "=acme", err: "want <task_queue>=<tenant>"},
		{name: "unknown role", in: "a=acme:root", err: `role "root" is not one of user, approver, admin`},
		{name: "bad tenant", in: "a=ac me", err: `queue "a"`},
		{name: "bound twice", in: "a=acme,a=beta", err: `queue "a" is bound twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseBindings(tc.in, roles)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestTurnRequest(t *testing.T) {
	b := Binding{TaskQueue: "agents-acme", TenantID: "acme", Roles: []string{"user"}}
	for _, tc := range []struct {
		name, in, err string
		binding       *Binding
	}{
		{name: "prompt", in: `{"prompt": "hi", "agent_id": "clerk"}`},
		{name: "a tenant", in: `{"prompt": "hi", "tenant_id": "beta"}`, err: "the tenant and the caller are the endpoint's"},
		{name: "a caller", in: `{"prompt": "hi", "caller": {"name": "root", "roles": ["admin"]}}`, err: "the tenant and the caller are the endpoint's"},
		{name: "another field", in: `{"prompt": "hi", "model": "x"}`, err: `unknown field "model"`},
		{name: "not an object", in: `"hi"`, err: "run_turn input"},
		{name: "no prompt", in: `{}`, err: "run_turn input"},
		{name: "no user role", in: `{"prompt": "hi"}`, binding: &Binding{TaskQueue: "q", TenantID: "acme", Roles: []string{"approver"}}, err: "no user role"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bb := b
			if tc.binding != nil {
				bb = *tc.binding
			}
			req, err := turnRequest(bb, json.RawMessage(tc.in), "req-1")
			if tc.err != "" {
				var he *nexus.HandlerError
				require.True(t, errors.As(err, &he), "a handler error the caller does not retry: %v", err)
				require.NotNil(t, he.Cause)
				require.Contains(t, he.Cause.Error(), tc.err, "the caller reads why under the handler's error")
				return
			}
			require.NoError(t, err)
			require.Equal(t, "acme", req.TenantID)
			require.Equal(t, "nexus-req-1", req.JobID, "the request id names the job, the same on a retried start")
			require.Equal(t, agent.ChannelNexus, req.Channel)
			require.Equal(t, &agent.Caller{Name: "nexus:agents-acme", Roles: []string{"user"}, Issuer: IssuerEndpoint, Subject: "agents-acme"}, req.Caller)
		})
	}
}

// FuzzTurnRequest: whatever the input, run_turn's decoder does not panic,
// and a request it makes is the binding's tenant's and caller's.
func FuzzTurnRequest(f *testing.F) {
	for _, s := range []string{`{"prompt": "hi"}`, `{"prompt": "hi", "tenant_id": "x"}`, `{"prompt": "", "job_id": "a/b"}`, `[]`, `null`, `{"prompt": "hi", "timeout_sec": -1}`} {
		f.Add(s)
	}
	b := Binding{TaskQueue: "q", TenantID: "acme", Roles: []string{"user"}}
	f.Fuzz(func(t *testing.T, in string) {
		req, err := turnRequest(b, json.RawMessage(in), "r")
		if err != nil {
			return
		}
		if req.TenantID != "acme" || req.Caller.Subject != "q" {
			t.Fatalf("a request of another tenant or caller: %+v", req)
		}
	})
}
