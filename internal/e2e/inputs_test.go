package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/testserver"
)

// inputsScript fetches flights, and works on the results a turn was
// given by their index: "cheapest of input N" reads previous_results[N]
// with input_ref, once the note on data lists the turn's inputs by index.
// API stands for the flights API's URL.
const inputsScript = `
rules:
  - name: flights
    when: {user: '(?i)flights from (?P<origin>[A-Za-z]{3}) to (?P<dest>[A-Za-z]{3})'}
    reply:
      tool_calls:
        - name: execute_pipeline
          arguments: '{"session_id": "s", "pipeline": [{"step": "http_request", "url": "API/search", "params": {"origin": "${origin}", "dest": "${dest}"}}, {"step": "table_sort", "field": "price", "order": "asc"}, {"step": "top_k", "k": 3}]}'
  - name: by-index
    when:
      user: '(?i)cheapest of input (?P<i>[0-9]+)'
      system: '(?s)- previous_results\[0\]: artifact://\S+ \(step fetch\): dataset.*\n- previous_results\[1\]: cas://sha256:\S+ \(step kept\)'
    reply:
      tool_calls:
        - name: execute_pipeline
          arguments: '{"session_id": "s", "input_ref": "previous_results[${i}]", "pipeline": [{"step": "table_sort", "field": "price", "order": "asc"}, {"step": "top_k", "k": 1}]}'
  - name: answer
    when: {tool: '(?s)a table of (?P<rows>[0-9]+) rows?.*?"airline":"(?P<airline>[^"]*)".*?"price":(?P<price>[0-9]+)'}
    reply: {text: 'Found ${rows}; the first is ${airline} at $$${price}.'}
  - name: tool-error
    when: {tool: '(?s)^error: (.+)$'}
    reply: {text: 'The tool said: $1'}
  - name: fallback
    reply: {text: "I don't know."}
`

// TestInputsByIndex: a turn given earlier results in
// context.previous_results reads them by index, previous_results[i], as
// well as by ref: the model is told each input's index, the tool reads
// the one it names without fetching anything, and an index past the end
// is an error the model reads, saying how many inputs the turn has.
func TestInputsByIndex(t *testing.T) {
	key := "flights-key-" + testserver.RandomID()
	t.Setenv("TEST_FLIGHTS_KEY", key)
	api := startFlights(t, key)
	srv := testserver.Start(t, testserver.Options{
		Script:   strings.ReplaceAll(inputsScript, "API", api.URL),
		Catalogs: []string{strings.ReplaceAll(dataCatalog, "API", strings.TrimPrefix(api.URL, "http://"))},
	})
	e := &dataEnv{env: &env{Server: srv, t: t}, api: api, key: key}

	fetched, _ := e.run(agent.TurnRequest{JobID: "fetch-" + testserver.RandomID(), Prompt: "flights from NYC to LAX"})
	require.Equal(t, agent.StatusCompleted, fetched.Status, "%+v", fetched.Error)
	require.EqualValues(t, 1, api.searches.Load())
	top := cheapest("NYC", "LAX")[:3]
	inputs := agent.TurnContext{PreviousResults: []agent.PreviousResult{
		{NodeID: "fetch", ResultRef: fetched.ResultRef},
		{NodeID: "kept", ResultRef: fetched.DataRef},
	}}

	for _, i := range []int{0, 1} {
		res, _ := e.run(agent.TurnRequest{JobID: fmt.Sprintf("index-%d-%s", i, testserver.RandomID()), Context: inputs,
			Prompt: fmt.Sprintf("the cheapest of input %d", i)})
		require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
		require.Equal(t, fmt.Sprintf("Found 1; the first is %s at $%d.", top[0].Airline, top[0].Price), res.Output)
		var args struct {
			InputRef string `json:"input_ref"`
		}
		require.NoError(t, json.Unmarshal(res.Metadata.ToolCalls[0].Args, &args))
		require.Equal(t, fmt.Sprintf("previous_results[%d]", i), args.InputRef)
		require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status)
	}
	require.EqualValues(t, 1, api.searches.Load(), "the inputs were read, not fetched again")

	res, _ := e.run(agent.TurnRequest{JobID: "past-" + testserver.RandomID(), Context: inputs, Prompt: "the cheapest of input 2"})
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, agent.ToolError, res.Metadata.ToolCalls[0].Status)
	require.Contains(t, res.Output, "The tool said: execute_pipeline: input_ref:")
	require.Contains(t, res.Output, "previous_results[2]: out of range: this turn was given 2 previous results, previous_results[0] to previous_results[1]")
}
