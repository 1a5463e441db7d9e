package nexusdoor

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
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
		{name: "a process step", in: `{"prompt": "check it", "history": "fresh", "node_id": "check", "run_id": "p1", "context": {"previous_results": [{"node_id": "answer", "result_ref": "r"}]}}`},
		{name: "a schema that does not compile", in: `{"prompt": "hi", "output_schema": {"type": 7}}`, err: "run_turn input"},
		{name: "a bad history", in: `{"prompt": "hi", "history": "all"}`, err: "run_turn input"},
		{name: "not an object", in: `"hi"`, err: "run_turn input"},
		{name: "no prompt", in: `{}`, err: "run_turn input"},
		{name: "no user role", in: `{"prompt": "hi"}`, binding: &Binding{TaskQueue: "q", TenantID: "acme", Roles: []string{"approver"}}, err: "no user role"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bb := b
			if tc.binding != nil {
				bb = *tc.binding
			}
			req, err := door{b: bb}.turnRequest(context.Background(), json.RawMessage(tc.in), "req-1")
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
		req, err := door{b: b}.turnRequest(context.Background(), json.RawMessage(in), "r")
		if err != nil {
			return
		}
		if req.TenantID != "acme" || req.Caller.Subject != "q" {
			t.Fatalf("a request of another tenant or caller: %+v", req)
		}
	})
}

func TestMessage(t *testing.T) {
	b := Binding{TaskQueue: "agents-acme", TenantID: "acme", Roles: []string{"user"}}
	for _, tc := range []struct {
		name, in, err string
		binding       *Binding
	}{
		{name: "message", in: `{"session_id": "s1", "prompt": "hi", "on_busy": "steer"}`},
		{name: "a tenant", in: `{"session_id": "s1", "prompt": "hi", "tenant_id": "beta"}`, err: "the tenant and the caller are the endpoint's"},
		{name: "no session", in: `{"prompt": "hi"}`, err: "send_message input"},
		{name: "no prompt", in: `{"session_id": "s1"}`, err: "send_message input"},
		{name: "a bad on_busy", in: `{"session_id": "s1", "prompt": "hi", "on_busy": "shout"}`, err: "send_message input"},
		{name: "no user role", in: `{"session_id": "s1", "prompt": "hi"}`, binding: &Binding{TaskQueue: "q", TenantID: "acme"}, err: "no user role"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bb := b
			if tc.binding != nil {
				bb = *tc.binding
			}
			conv, msg, err := door{b: bb}.message(context.Background(), json.RawMessage(tc.in), "req-1")
			if tc.err != "" {
				var he *nexus.HandlerError
				require.True(t, errors.As(err, &he), "a handler error: %v", err)
				require.Contains(t, he.Cause.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "acme", conv.TenantID)
			require.Equal(t, "nexus-req-1", msg.JobID)
			require.Equal(t, agent.ChannelNexus, msg.Channel)
			require.Equal(t, "agents-acme", msg.Caller.Subject)
		})
	}
}

func TestStreamOf(t *testing.T) {
	token := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		name, token, want, err string
	}{
		{name: "a turn's", token: token(`{"t":1,"ns":"default","wid":"turn/acme/j1"}`), want: "turn/acme/j1"},
		{name: "padded", token: base64.URLEncoding.EncodeToString([]byte(`{"t":1,"ns":"default","wid":"turn/acme/j12"}`)), want: "turn/acme/j12"},
		{name: "another workflow", token: token(`{"t":1,"ns":"default","wid":"conv/acme/s1"}`), err: "want turn/<tenant>/<job_id>"},
		{name: "another kind", token: token(`{"t":2,"ns":"default"}`), err: "not a turn's"},
		{name: "not base64", token: "%%%", err: "operation token"},
		{name: "not JSON", token: token("hi"), err: "operation token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := StreamOf(tc.token)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// TestCancelOtherTenant: a cancel names its turn by the operation's
// token, which a caller may forge; a token of another tenant's turn, or
// no turn's, is refused before anything is cancelled.
func TestCancelOtherTenant(t *testing.T) {
	token := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	d := door{b: Binding{TaskQueue: "q", TenantID: "acme", Roles: []string{"user"}}, o: Options{TurnQueue: "agentflow"}}
	run, err := d.runTurn()
	require.NoError(t, err)
	send, err := d.sendMessage()
	require.NoError(t, err)
	for _, op := range []nexus.Operation[json.RawMessage, agent.TurnResult]{run, send} {
		for _, tc := range []struct{ token, want string }{
			{token(`{"t":1,"ns":"default","wid":"turn/beta/j1"}`), "no such turn of the endpoint's tenant"},
			{token(`{"t":1,"ns":"default","wid":"conv/acme/s1"}`), "operation token"},
			{"%%%", "operation token"},
		} {
			err := op.Cancel(context.Background(), tc.token, nexus.CancelOperationOptions{})
			var he *nexus.HandlerError
			require.True(t, errors.As(err, &he), "%s: a handler error: %v", op.Name(), err)
			require.Contains(t, he.Error()+" "+fmt.Sprint(he.Cause), tc.want, op.Name())
		}
	}
}
