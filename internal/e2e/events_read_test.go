package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// readStory is what the model streams, a word a chunk, in
// TestListEventsDuringModelCall.
const readStory = "Once upon a time a durable agent streamed a story to a reader who asked for its events " +
	"while the model was still writing the rest of it."

// modelHold holds the scripted model's stream after its first n chunks
// (scripted.Options.OnChunk runs once each chunk is flushed) until the
// test releases it: a model call in flight, for as long as the test wants.
type modelHold struct {
	n       int32
	chunks  atomic.Int32
	held    chan struct{}
	release chan struct{}
	once    sync.Once
}

func newModelHold(n int32) *modelHold {
	return &modelHold{n: n, held: make(chan struct{}), release: make(chan struct{})}
}

func (h *modelHold) chunk(string, time.Time) {
	if h.chunks.Add(1) == h.n {
		close(h.held)
		<-h.release
	}
}

func (h *modelHold) free() { h.once.Do(func() { close(h.release) }) }

// TestListEventsDuringModelCall: GET /v1/{stream_id}/events sent while
// the turn's model call streams — a local activity, which holds the
// turn's workflow task, so that the events query waits for its end —
// answers while the model is still held, with the events so far: the
// turn's own, then the tokens streamed, in order and without gaps. With
// wait_sec it waits: for the wait's end when nothing comes, and, once the
// model goes on, until the next event exists, holding one of its tenant's
// streams meanwhile. The log then ends with the whole story.
func TestListEventsDuringModelCall(t *testing.T) {
	hold := newModelHold(5)
	e := newHTTPEnvWith(t, func(o *testserver.Options) {
		o.Script = `
pacing: {chunk_words: 1, delay_ms: 1}
rules:
  - name: story
    when: {user: '(?i)^tell me a story'}
    reply: {text: '` + readStory + `'}
`
		o.Model.OnChunk = hold.chunk
	})
	// A test that fails early frees the model before the server stops,
	// which waits for the model's requests.
	t.Cleanup(hold.free)
	var started pb.StartResponse
	e.ok("POST", "/v1/turns", e.user, `{"job_id": "read-`+testserver.RandomID()+`", "prompt": "Tell me a story"}`, &started)
	stream := started.GetStreamId()
	select {
	case <-hold.held:
	case <-time.After(2 * time.Minute):
		t.Fatal("the model did not stream")
	}

	// Each read below answers while the model is held: one that waited
	// for the call would wait for the test to release it, and fail at
	// its client's deadline instead. The five words streamed so far reach
	// the log's live path within a batch interval.
	held := strings.Join(strings.Fields(readStory)[:5], " ")
	var page pb.ListEventsResponse
	require.Eventually(t, func() bool {
		page.Reset()
		e.ok("GET", "/v1/"+stream+"/events?after_index=0", e.user, "", &page)
		evs := fromPB(page.GetEvents())
		for i, ev := range evs {
			require.Equal(t, int64(i+1), ev.Index, "in order, without gaps")
		}
		require.NotEmpty(t, evs)
		require.Equal(t, agent.StreamRunning, evs[0].Status, "the turn's own events come first")
		require.Equal(t, evs[len(evs)-1].Index+1, page.GetNextIndex())
		require.False(t, page.GetDone())
		text := agent.ReplayText(evs)
		require.True(t, strings.HasPrefix(held, text), "the tokens so far are the story's start: %q", text)
		return text == held
	}, time.Minute, 20*time.Millisecond, "the words streamed before the hold")
	last := page.GetNextIndex() - 1

	// A read that waits while nothing comes answers the empty page when
	// its wait ends.
	page.Reset()
	e.ok("GET", fmt.Sprintf("/v1/%s/events?after_index=%d&wait_sec=1", stream, last), e.user, "", &page)
	require.Empty(t, page.GetEvents())
	require.Equal(t, last+1, page.GetNextIndex())
	require.False(t, page.GetDone())

	// One that waits as the model goes on returns with what comes next.
	type read struct {
		code int
		body []byte
		err  error
	}
	waited := make(chan read, 1)
	go func() {
		var r read
		defer func() { waited <- r }()
		req, err := http.NewRequest("GET", fmt.Sprintf("%s/v1/%s/events?after_index=%d&wait_sec=60", e.api, stream, last), nil)
		if r.err = err; err != nil {
			return
		}
		req.Header.Set("Authorization", "Bearer "+e.user)
		resp, err := http.DefaultClient.Do(req)
		if r.err = err; err != nil {
			return
		}
		defer resp.Body.Close()
		r.code = resp.StatusCode
		r.body, r.err = io.ReadAll(resp.Body)
	}()
	require.Eventually(t, func() bool { return e.Gateway().OpenStreams("demo") == 1 }, time.Minute, 10*time.Millisecond,
		"the waiting read holds one of the tenant's streams")
	hold.free()
	r := <-waited
	require.NoError(t, r.err)
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	page.Reset()
	require.NoError(t, protojson.Unmarshal(r.body, &page), "%s", r.body)
	evs := fromPB(page.GetEvents())
	require.NotEmpty(t, evs, "the wait ended with the next event")
	require.Equal(t, last+1, evs[0].Index)
	require.Equal(t, evs[len(evs)-1].Index+1, page.GetNextIndex())
	require.Zero(t, e.Gateway().OpenStreams("demo"), "the stream is released")

	// The whole log: the story, once.
	all := fromPB(e.events(stream, e.user))
	require.Equal(t, readStory, agent.ReplayText(all))
	require.Equal(t, agent.StreamCompleted, all[len(all)-1].Status)
	for _, ev := range evs {
		require.Equal(t, all[ev.Index-1], ev, "what the wait returned is the log's event %d", ev.Index)
	}
}
