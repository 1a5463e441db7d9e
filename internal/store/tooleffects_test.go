package store_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/effects"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/store"
)

// TestToolEffects: an attempt records its intent once and again for its
// own later writes; another attempt finds it and records nothing, and
// learns whether it was answered; a released intent lets the next attempt
// send; a call of an unknown turn is not found.
func TestToolEffects(t *testing.T) {
	ctx := context.Background()
	s := open(t, store.Options{})
	require.NoError(t, s.BeginTurn(ctx, demoTurn("j1")))
	k := effects.Key{TenantID: "demo", JobID: "j1", Seq: 3}

	_, ok, err := s.Intend(ctx, k, "a1", "POST https://api.example.com/bookings")
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = s.Intend(ctx, k, "a1", "POST https://api.example.com/payments")
	require.NoError(t, err)
	require.True(t, ok, "the attempt's own later write")

	prior, ok, err := s.Intend(ctx, k, "a2", "POST https://api.example.com/bookings")
	require.NoError(t, err)
	require.False(t, ok, "another attempt's intent stands")
	require.Equal(t, "a1", prior.Attempt)
	require.Equal(t, "POST https://api.example.com/payments", prior.Target)
	require.False(t, prior.Delivered)

	require.NoError(t, s.Answered(ctx, k, "a2", 201), "another attempt's answer changes nothing")
	require.NoError(t, s.Answered(ctx, k, "a1", 201))
	prior, ok, err = s.Intend(ctx, k, "a3", "POST https://api.example.com/bookings")
	require.NoError(t, err)
	require.False(t, ok)
	require.True(t, prior.Delivered)
	require.Equal(t, 201, prior.Status)

	require.NoError(t, s.Release(ctx, k, "a1"), "an answered intent is not released")
	_, ok, err = s.Intend(ctx, k, "a3", "x")
	require.NoError(t, err)
	require.False(t, ok)

	// A person's decision to send the call again is a delivery of its
	// own: past the first's intent, at most once itself.
	again := k
	again.Resend = "apr_0123"
	_, ok, err = s.Intend(ctx, again, "r1", "POST https://api.example.com/bookings")
	require.NoError(t, err)
	require.True(t, ok, "the re-send's own intent")
	prior, ok, err = s.Intend(ctx, again, "r2", "POST https://api.example.com/bookings")
	require.NoError(t, err)
	require.False(t, ok, "a retried re-send finds it")
	require.Equal(t, "r1", prior.Attempt)
	prior, ok, err = s.Intend(ctx, k, "a4", "x")
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, "a1", prior.Attempt, "the first delivery's intent is untouched")

	k2 := effects.Key{TenantID: "demo", JobID: "j1", Seq: 4}
	_, ok, err = s.Intend(ctx, k2, "b1", "POST x")
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, s.Release(ctx, k2, "b1"))
	_, ok, err = s.Intend(ctx, k2, "b2", "POST x")
	require.NoError(t, err)
	require.True(t, ok, "a released intent was never sent: the next attempt sends")

	_, _, err = s.Intend(ctx, effects.Key{TenantID: "demo", JobID: "nope", Seq: 1}, "c1", "POST x")
	requireCode(t, err, agent.CodeNotFound)
	_, _, err = s.Intend(ctx, effects.Key{TenantID: "demo", JobID: "j1", Seq: -1}, "c1", "POST x")
	requireCode(t, err, agent.CodeInvalid)
	_, _, err = s.Intend(ctx, k, "", "POST x")
	requireCode(t, err, agent.CodeInvalid)
}

// TestEgressGatesWrites: through the egress client, with the store as the
// ledger, a POST of one call reaches a server that never deduplicates
// once, whichever attempt sends it; a GET and a PUT are not gated; a POST
// whose connection cannot be made is released, so that the next attempt
// sends it.
func TestEgressGatesWrites(t *testing.T) {
	ctx := context.Background()
	s := open(t, store.Options{})
	require.NoError(t, s.BeginTurn(ctx, demoTurn("j2")))
	var posts, others atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
		} else {
			others.Add(1)
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer api.Close()
	policy, err := egress.ParsePolicy([]string{"127.0.0.1"})
	require.NoError(t, err)
	op, err := egress.NewOperator(ctx, egress.OperatorConfig{Allow: []string{"127.0.0.1"}})
	require.NoError(t, err)
	client := op.Client(policy)

	send := func(gate *effects.Gate, method, url string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(effects.With(ctx, gate), method, url, nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return resp, err
	}
	k := effects.Key{TenantID: "demo", JobID: "j2", Seq: 1}
	first := effects.NewGate(s, k)
	_, err = send(first, http.MethodPost, api.URL+"/bookings")
	require.NoError(t, err)
	_, err = send(first, http.MethodPost, api.URL+"/bookings?again=1")
	require.NoError(t, err, "the attempt's own second write")
	sent, unanswered := first.Sent()
	require.True(t, sent)
	require.False(t, unanswered)

	retry := effects.NewGate(s, k)
	_, err = send(retry, http.MethodPost, api.URL+"/bookings")
	var held *effects.MaybeSentError
	require.ErrorAs(t, err, &held)
	require.True(t, held.Intent.Delivered)
	require.Equal(t, 201, held.Intent.Status)
	require.Contains(t, held.Error(), "POST http://"+api.Listener.Addr().String()+"/bookings")
	require.NotContains(t, held.Error(), "again=1", "no query in what is recorded")
	_, err = send(retry, http.MethodGet, api.URL+"/bookings")
	require.NoError(t, err)
	_, err = send(retry, http.MethodPut, api.URL+"/seats/1")
	require.NoError(t, err)
	require.EqualValues(t, 2, posts.Load())
	require.EqualValues(t, 2, others.Load())

	// Nothing listens: the write never left, and the next attempt sends.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + l.Addr().String()
	require.NoError(t, l.Close())
	k2 := effects.Key{TenantID: "demo", JobID: "j2", Seq: 2}
	_, err = send(effects.NewGate(s, k2), http.MethodPost, closed+"/bookings")
	require.Error(t, err)
	var notHeld *effects.MaybeSentError
	require.False(t, errors.As(err, &notHeld))
	_, err = send(effects.NewGate(s, k2), http.MethodPost, api.URL+"/bookings")
	require.NoError(t, err, "an unsent write is sent by the next attempt")
	require.EqualValues(t, 3, posts.Load())
}
