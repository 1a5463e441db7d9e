package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/flights"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// dataScript drives the data agent of seed 004 §10: it fetches flights
// with execute_pipeline, works on earlier results by ref, and answers
// from the rows it gets back. API stands for the flights API's URL.
const dataScript = `
pacing: {chunk_words: 4, delay_ms: 2}
rules:
  - name: check
    when:
      user: '(?i)^check this answer'
      system: '(?P<ref>artifact://\S+) \(step answer\): dataset'
    reply:
      tool_calls:
        - name: execute_pipeline
          arguments: '{"session_id": "check", "input_ref": "${ref}", "pipeline": [{"step": "table_sort", "field": "price", "order": "asc"}, {"step": "top_k", "k": 1}]}'
  - name: flights-top
    when: {user: '(?i)flights from (?P<origin>[A-Za-z]{3}) to (?P<dest>[A-Za-z]{3}).*\btop (?P<k>[0-9]+)'}
    reply:
      tool_calls:
        - name: execute_pipeline
          arguments: '{"session_id": "s", "pipeline": [{"step": "http_request", "url": "API/search", "params": {"origin": "${origin}", "dest": "${dest}"}}, {"step": "table_sort", "field": "price", "order": "asc"}, {"step": "top_k", "k": ${k}}]}'
  - name: under
    when:
      user: '(?i)filter those under \$(?P<max>[0-9]+)'
      system: '(?P<ref>cas://sha256:[0-9a-f]{64})'
    reply:
      tool_calls:
        - name: execute_pipeline
          arguments: '{"session_id": "s", "input_ref": "${ref}", "pipeline": [{"step": "table_filter", "condition": {"field": "price", "op": "<", "value": ${max}}}]}'
  - name: metadata
    when: {user: '(?i)instance metadata'}
    reply:
      tool_calls:
        - name: execute_pipeline
          arguments: '{"session_id": "s", "pipeline": [{"step": "http_request", "url": "http://169.254.169.254/latest/meta-data/"}]}'
  - name: data-answer
    when: {tool: '(?s)a table of (?P<rows>[0-9]+) rows?.*?"airline":"(?P<airline>[^"]*)".*?"price":(?P<price>[0-9]+)'}
    reply: {text: 'Found ${rows} flights; the first is ${airline} at $$${price}.'}
  - name: data-empty
    when: {tool: 'a table of 0 rows'}
    reply: {text: 'No flights match.'}
  - name: tool-error
    when: {tool: '(?s)^error: (.+)$'}
    reply: {text: 'The tool said: $1'}
  - name: fallback
    reply: {text: "I don't know."}
`

// dataCatalog gives the data agent execute_pipeline, the flights API in
// the tenant's egress allowlist and the API's key by reference. API
// stands for the API's host:port.
const dataCatalog = `
tenant: demo
default_agent: data
egress: ["API"]
tools:
  - name: execute_pipeline
    kind: execute_pipeline
    config:
      credentials: [{host: "API", header: X-Api-Key, secret: "env:TEST_FLIGHTS_KEY"}]
agents:
  - id: data
    model: openai:gpt-4o-mini
    tools: [execute_pipeline]
    limits: {max_iterations: 4, turn_timeout_sec: 60}
`

// flightsAPI is internal/flights behind an API key, counting the
// searches it answers.
type flightsAPI struct {
	*httptest.Server
	searches atomic.Int32
}

func startFlights(t *testing.T, key string) *flightsAPI {
	t.Helper()
	api := &flightsAPI{}
	h := flights.Handler()
	api.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != key {
			http.Error(w, `{"error":"a valid X-Api-Key is required"}`, http.StatusUnauthorized)
			return
		}
		api.searches.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(api.Close)
	return api
}

// dataEnv is a worker with the data agent, the flights API, and a log
// kept whole, at debug level, for the secret test.
type dataEnv struct {
	*env
	api *flightsAPI
	key string
	log *lockedBuffer
	ids []string // the workflows the test ran
}

func newDataEnv(t *testing.T) *dataEnv {
	t.Helper()
	key := "flights-key-" + testserver.RandomID() + testserver.RandomID()
	t.Setenv("TEST_FLIGHTS_KEY", key)
	api := startFlights(t, key)
	host := strings.TrimPrefix(api.URL, "http://")
	logger, log := keptLog(t, zap.WarnLevel)
	srv := testserver.Start(t, testserver.Options{
		Script:   strings.ReplaceAll(dataScript, "API", api.URL),
		Catalogs: []string{strings.ReplaceAll(dataCatalog, "API", host)},
		Logger:   logger,
	})
	return &dataEnv{env: &env{Server: srv, t: t}, api: api, key: key, log: log}
}

// run runs a turn of the data agent to its end.
func (e *dataEnv) run(req agent.TurnRequest) (agent.TurnResult, string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req.Version, req.TenantID = agent.ProtocolVersion, "demo"
	run, err := turnclient.Start(ctx, e.Client(), e.TaskQueue, req)
	require.NoError(e.t, err)
	e.ids = append(e.ids, run.GetID())
	res, err := turnclient.Result(ctx, run)
	require.NoError(e.t, err)
	return res, run.GetID()
}

// cheapest is the API's flights from origin to dest by price, as a
// stable sort gives them.
func cheapest(origin, dest string) []flights.Flight {
	fs := flights.Search(origin, dest)
	slices.SortStableFunc(fs, func(a, b flights.Flight) int { return a.Price - b.Price })
	return fs
}

// TestDataTurns is seed 004 §10.1 and its Test 3 on the real stack: a
// turn fetches flights, sorts them and keeps the top 3 by ref; a second
// turn of the session filters that result by input_ref, without fetching
// again; a third asks for a host outside the allowlist and is refused.
func TestDataTurns(t *testing.T) {
	e := newDataEnv(t)
	session := "trip-" + testserver.RandomID()
	want := cheapest("NYC", "LAX")[:3]

	res, id := e.run(agent.TurnRequest{JobID: "top-" + testserver.RandomID(), SessionID: session,
		Prompt: "fetch flights from NYC to LAX, sort by price, show top 3"})
	require.Equal(t, agent.StatusCompleted, res.Status)
	require.Equal(t, fmt.Sprintf("Found 3 flights; the first is %s at $%d.", want[0].Airline, want[0].Price), res.Output)
	require.EqualValues(t, 1, e.api.searches.Load())

	// result_preview describes the data, as in seed 004 §2.2.
	var preview agent.DataPreview
	require.NoError(t, json.Unmarshal(res.ResultPreview, &preview))
	require.Equal(t, agent.DataDataset, preview.Type)
	require.Equal(t, 3, preview.RowCount)
	require.True(t, strings.HasPrefix(res.DataRef, agent.CASRefPrefix), res.DataRef)
	require.Equal(t, res.DataRef, preview.Ref)
	require.Len(t, preview.Sample, 3)
	require.False(t, res.Metadata.CacheHit)
	require.Equal(t, "execute_pipeline", res.Metadata.ToolCalls[0].Tool)

	// The data behind the ref is the three cheapest flights, in order;
	// so is the data behind result_ref.
	for _, ref := range []string{res.DataRef, res.ResultRef} {
		data, err := e.Store().Data(context.Background(), "demo", ref)
		require.NoError(t, err, ref)
		var rows []flights.Flight
		require.NoError(t, json.Unmarshal(data, &rows))
		require.Equal(t, want, rows, ref)
	}
	// Another tenant cannot read it.
	_, err := e.Store().Data(context.Background(), "other", res.DataRef)
	require.True(t, agent.IsCode(err, agent.CodeNotFound), "%v", err)

	// The stream showed the call's progress and, at its end, the data.
	page, err := turnclient.Events(context.Background(), e.Client(), id, agent.EventsQuery{})
	require.NoError(t, err)
	var progress, ended bool
	for _, ev := range page.Events {
		switch ev.Kind {
		case agent.EventToolProgress:
			progress = true
			require.Equal(t, "execute_pipeline", ev.Tool.Name)
		case agent.EventToolEnd:
			ended = true
			require.NotNil(t, ev.Tool.Data)
			require.Equal(t, res.DataRef, ev.Tool.Data.Ref)
			require.Equal(t, 3, ev.Tool.Data.RowCount)
		}
	}
	require.True(t, progress, "a tool_progress event")
	require.True(t, ended, "a tool_end event")
	e.replay(id, "data_turn")

	// Test 3: the next turn works on that result by ref.
	res2, _ := e.run(agent.TurnRequest{JobID: "under-" + testserver.RandomID(), SessionID: session,
		Prompt: "now filter those under $" + fmt.Sprint(want[2].Price)})
	require.Equal(t, agent.StatusCompleted, res2.Status)
	require.EqualValues(t, 1, e.api.searches.Load(), "the second turn does not fetch again")
	var args struct {
		InputRef string `json:"input_ref"`
	}
	require.NoError(t, json.Unmarshal(res2.Metadata.ToolCalls[0].Args, &args))
	require.Equal(t, res.DataRef, args.InputRef)
	kept := 0
	for _, f := range want {
		if f.Price < want[2].Price {
			kept++
		}
	}
	require.Equal(t, fmt.Sprintf("Found %d flights; the first is %s at $%d.", kept, want[0].Airline, want[0].Price), res2.Output)
	require.NoError(t, json.Unmarshal(res2.ResultPreview, &preview))
	require.Equal(t, kept, preview.RowCount)

	// The same question again is answered from the tenant's cache.
	res3, _ := e.run(agent.TurnRequest{JobID: "again-" + testserver.RandomID(), SessionID: "other-" + session,
		Prompt: "fetch flights from NYC to LAX, sort by price, show top 3"})
	require.Equal(t, res.Output, res3.Output)
	require.True(t, res3.Metadata.CacheHit)
	require.True(t, res3.Metadata.ToolCalls[0].CacheHit)
	require.EqualValues(t, 1, e.api.searches.Load())

	// Egress: the instance metadata address is refused, and the model is
	// told why.
	res4, _ := e.run(agent.TurnRequest{JobID: "meta-" + testserver.RandomID(), Prompt: "show me the instance metadata"})
	require.Equal(t, agent.StatusCompleted, res4.Status)
	require.Contains(t, res4.Output, "The tool said: execute_pipeline: step 0 (http_request)")
	require.Contains(t, res4.Output, "169.254.169.254")
	require.Contains(t, res4.Output, "egress allowlist")
	require.Equal(t, agent.ToolError, res4.Metadata.ToolCalls[0].Status)

	// The API key was used on every fetch, and is nowhere else: not in
	// the turns' histories, the database or the worker's log.
	e.requireNoSecret(e.key)
}

// TestProcessExampleData runs the example process on a data question:
// the answer step keeps the flights by ref, and the check step's tool
// reads them through context.previous_results[].result_ref.
func TestProcessExampleData(t *testing.T) {
	e := newDataEnv(t)
	out, id := runProcess(t, e.Server, "fetch flights from SFO to SEA, sort by price, show top 5")
	e.ids = append(e.ids, id, contract.TurnWorkflowID("demo", id+"-answer"), contract.TurnWorkflowID("demo", id+"-check"))

	best := cheapest("SFO", "SEA")[0]
	require.Equal(t, fmt.Sprintf("Found 5 flights; the first is %s at $%d.", best.Airline, best.Price), out.Answer)
	require.Equal(t, fmt.Sprintf("Found 1 flights; the first is %s at $%d.", best.Airline, best.Price), out.Check)
	require.EqualValues(t, 1, e.api.searches.Load(), "the check reads the answer's data by ref")

	check, err := e.Store().Result(context.Background(), "demo", id+"-check")
	require.NoError(t, err)
	var args struct {
		InputRef string `json:"input_ref"`
	}
	require.NoError(t, json.Unmarshal(check.Metadata.ToolCalls[0].Args, &args))
	require.Equal(t, out.AnswerRef, args.InputRef)
	e.requireNoSecret(e.key)
}

// requireNoSecret fails the test when secret, in any case or in hex, is
// in any turn's history, any table of the database or the worker's log.
func (e *dataEnv) requireNoSecret(secret string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// In any case: an echo may have upper-cased it, and a table's bytea
	// is dumped in hex.
	forms := [][]byte{bytes.ToLower([]byte(secret)), []byte(hex.EncodeToString([]byte(secret)))}
	contains := func(b []byte) bool {
		b = bytes.ToLower(b)
		return slices.ContainsFunc(forms, func(f []byte) bool { return bytes.Contains(b, f) })
	}

	// Histories: payloads are raw bytes in the wire form of the events.
	require.NotEmpty(e.t, e.ids)
	for _, id := range e.ids {
		for _, ev := range e.history(id) {
			raw, err := proto.Marshal(ev)
			require.NoError(e.t, err)
			require.False(e.t, contains(raw), "the secret is in the history of %s", id)
		}
	}

	// Every table, row by row as text (bytea as hex).
	rows, err := e.Store().Pool().Query(ctx, `SELECT quote_ident(table_name) FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`)
	require.NoError(e.t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(e.t, err)
	require.NotEmpty(e.t, tables)
	for _, table := range tables {
		var dump string
		require.NoError(e.t, e.Store().Pool().QueryRow(ctx, `SELECT coalesce(string_agg(t::text, E'\n'), '') FROM `+table+` t`).Scan(&dump))
		require.False(e.t, contains([]byte(dump)), "the secret is in table %s", table)
	}

	log := e.log.Bytes()
	require.NotEmpty(e.t, log)
	require.False(e.t, contains(log), "the secret is in the worker's log")
}

// keptLog is a logger for a test server that keeps everything the server
// logs, at every level, as JSON lines in log (for tests that search it for
// what must not be there), and shows the test what it logs from level
// shown up.
func keptLog(t *testing.T, shown zapcore.Level) (logger *zap.Logger, log *lockedBuffer) {
	log = &lockedBuffer{}
	return zap.New(zapcore.NewTee(
		zaptest.NewLogger(t, zaptest.Level(shown)).Core(),
		zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.AddSync(log), zap.DebugLevel),
	)), log
}

// lockedBuffer is a log sink that the server writes while a test reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}
