package scripted

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStallFault: a stall fault holds its request without an answer
// until the client gives up, then answers the next one; a stall with a
// status is refused.
func TestStallFault(t *testing.T) {
	srv := start(t, `rules: [{name: hung, fault: {stall: true}, reply: {text: answered the retry}}]`)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+"/chat/completions", strings.NewReader(userRequest("x", true)))
	require.NoError(t, err)
	_, err = http.DefaultClient.Do(req)
	require.ErrorIs(t, err, context.DeadlineExceeded, "no answer came before the client gave up")
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	require.True(t, reqs[0].Faulted)

	resp := post(t, srv, userRequest("x", false))
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Contains(t, string(body), "answered the retry")

	_, err = Parse([]byte(`rules: [{name: r, fault: {stall: true, status: 500}, reply: {text: x}}]`))
	require.ErrorContains(t, err, "fault.stall is exclusive with status and cut_after_chunks")
}
