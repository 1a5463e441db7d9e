package chaos

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/scripted"
)

// TestCountingScript: the long turn's model asks for 0+1 when asked to
// count, says step n's text and asks for n+1 after the result n, answers
// after the last result, and counts each step's requests under its rule.
func TestCountingScript(t *testing.T) {
	model := scripted.New(countingScript(5), scripted.Options{})
	srv := httptest.NewServer(model)
	defer srv.Close()
	ask := func(last map[string]any) (text, args string) {
		msgs := []map[string]any{{"role": "system", "content": "Count with the calculator."}, {"role": "user", "content": "count"}}
		if last != nil {
			msgs = append(msgs, map[string]any{"role": "assistant", "tool_calls": []map[string]any{{"id": "c", "type": "function",
				"function": map[string]any{"name": "calculator", "arguments": "{}"}}}}, last)
		}
		body, err := json.Marshal(map[string]any{"model": "gpt-4o-mini", "messages": msgs})
		require.NoError(t, err)
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(string(body)))
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var out struct {
			Choices []struct {
				Message struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						Function struct{ Arguments string } `json:"function"`
					} `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		m := out.Choices[0].Message
		if len(m.ToolCalls) > 0 {
			args = m.ToolCalls[0].Function.Arguments
		}
		return m.Content, args
	}
	result := func(n int) map[string]any {
		return map[string]any{"role": "tool", "tool_call_id": "c", "content": fmt.Sprint(n)}
	}

	text, args := ask(nil)
	require.Empty(t, text)
	require.JSONEq(t, `{"expression": "0+1"}`, args)
	text, args = ask(result(3))
	require.Equal(t, countText(3), text)
	require.JSONEq(t, `{"expression": "3+1"}`, args)
	text, args = ask(result(5))
	require.Equal(t, countAnswer(5), text)
	require.Empty(t, args)
	ask(result(3))
	require.Equal(t, map[int]int{0: 1, 3: 2, 5: 1}, asked(model, 5))
	require.Equal(t, []int{3}, stepsAskedAgain(asked(model, 5)))
}

// TestAskedAgainAfterFaults: a step's model call is asked again only
// after a fault struck, one step at most for each fault.
func TestAskedAgainAfterFaults(t *testing.T) {
	faults := func(asked ...map[int]int) []*longFault {
		var out []*longFault
		for i, a := range asked {
			out = append(out, &longFault{name: fmt.Sprintf("fault %d", i+1), asked: a})
		}
		return out
	}
	tests := []struct {
		name   string
		faults []*longFault
		final  map[int]int
		err    string
	}{
		{"none asked again", faults(map[int]int{1: 1}, map[int]int{1: 1, 2: 1}), map[int]int{1: 1, 2: 1, 3: 1}, ""},
		{"one after each fault", faults(map[int]int{1: 1}, map[int]int{1: 2, 2: 1}), map[int]int{1: 2, 2: 1, 3: 2}, ""},
		{"one after the second fault", faults(map[int]int{1: 1}, map[int]int{1: 1}), map[int]int{1: 1, 2: 2}, ""},
		{"before the first fault", faults(map[int]int{1: 2}, map[int]int{1: 2}), map[int]int{1: 2}, "steps [1] were asked again by the time fault 1"},
		{"two after one fault", faults(map[int]int{1: 1}, map[int]int{1: 2, 2: 1}), map[int]int{1: 2, 2: 2, 3: 2}, "steps [1 2 3] were asked again by the time the turn ended"},
		{"one step three times", faults(map[int]int{1: 1}, map[int]int{1: 1}), map[int]int{1: 3}, "steps [1] were asked again by the time the turn ended"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := askedAgainAfterFaults(tt.faults, tt.final)
			if tt.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.err)
		})
	}
}

// TestInOrder: the result must list the calls 0+1 … in order, each ok,
// each with its own id.
func TestInOrder(t *testing.T) {
	rec := func(id, expr string) agent.ToolCallRecord {
		return agent.ToolCallRecord{CallID: id, Tool: "calculator", Args: json.RawMessage(`{"expression": "` + expr + `"}`), Status: agent.ToolOK}
	}
	require.NoError(t, inOrder([]agent.ToolCallRecord{rec("a", "0+1"), rec("b", "1+1")}, 2))
	require.ErrorContains(t, inOrder([]agent.ToolCallRecord{rec("a", "0+1")}, 2), "lists 1 calls, want 2")
	require.ErrorContains(t, inOrder([]agent.ToolCallRecord{rec("a", "1+1"), rec("b", "0+1")}, 2), "call 1 is a")
	require.ErrorContains(t, inOrder([]agent.ToolCallRecord{rec("a", "0+1"), rec("a", "1+1")}, 2), "its own id")
	require.ErrorContains(t, once("stored", map[string]int{"a": 1, "b": 2}, 2), "call b 2 times")
}
