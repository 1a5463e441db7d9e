package asked

import (
	"context"
	"testing"

	"github.com/nexus-rpc/sdk-go/nexus"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
)

// header is a Temporal header, as the SDK's reader and writer see it.
type header map[string]*commonpb.Payload

func (h header) Set(k string, p *commonpb.Payload) { h[k] = p }
func (h header) Get(k string) (*commonpb.Payload, bool) {
	p, ok := h[k]
	return p, ok
}
func (h header) ForEachKey(f func(string, *commonpb.Payload) error) error {
	for k, p := range h {
		if err := f(k, p); err != nil {
			return err
		}
	}
	return nil
}

// TestHeaderReadBack: what the turn writes an activity reads back; no
// header, or one that does not decode, says nothing.
func TestHeaderReadBack(t *testing.T) {
	want := Asked{TenantID: "acme", Caller: "ana", AgentID: "clerk", TurnID: "turn/acme/j1", JobID: "j1", CallID: "c1", Tool: "lookup", Key: "j1:tool:2:c1"}
	p, err := dc.ToPayload(want)
	require.NoError(t, err)
	ctx, err := Propagator().Extract(context.Background(), header{HeaderKey: p})
	require.NoError(t, err)
	got, ok := Of(ctx)
	require.True(t, ok)
	require.Equal(t, want, got)

	for _, h := range []header{{}, {HeaderKey: &commonpb.Payload{Data: []byte("{")}}} {
		ctx, err := Propagator().Extract(context.Background(), h)
		require.NoError(t, err)
		_, ok := Of(ctx)
		require.False(t, ok)
	}
	// A client's own context says nothing: only a turn writes the header.
	w := header{}
	require.NoError(t, Propagator().Inject(context.Background(), w))
	require.Empty(t, w)

	n, ok := OfNexus(nexus.Header{"agentflow-asked": `{"tenant_id":"acme","key":"j1:tool:2:c1"}`})
	require.True(t, ok)
	require.Equal(t, Asked{TenantID: "acme", Key: "j1:tool:2:c1"}, n)
	for _, h := range []nexus.Header{{}, {"agentflow-asked": "{"}} {
		_, ok := OfNexus(h)
		require.False(t, ok)
	}
}
