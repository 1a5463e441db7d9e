package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	mcpdoor "github.com/agentflow/agentflow/internal/gateway/mcp"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/chatpage"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// askChatScript is askScript with a round of two questions: "plan a
// trip" asks which city, with choices, and for wishes, in free text.
var askChatScript = strings.Replace(askScript, "  - name: answer\n", `  - name: plan
    when: {user: '(?i)^plan a trip'}
    reply:
      tool_calls:
        - {name: ask_user, arguments: '{"question": "Which city?", "choices": ["Paris", "Rome"]}'}
        - {name: ask_user, arguments: '{"question": "Any wishes?"}'}
  - name: answer
`, 1)

// askMCPCatalog is askCatalog with the planner exposed through MCP.
var askMCPCatalog = strings.Replace(askCatalog, "    tools: [ask_user, ask_reviewer]\n",
	"    tools: [ask_user, ask_reviewer]\n    expose: [mcp]\n", 1)

// mcpBearer adds a bearer token to every request of an MCP client.
type mcpBearer struct {
	token string
	base  http.RoundTripper
}

// RoundTrip sends r with the token (http.RoundTripper).
func (b mcpBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// elicited is what the MCP server asked the client: the message and the
// requested schema's "answer" property.
type elicited struct {
	Message  string
	Required []string
	Answer   struct {
		Type string   `json:"type"`
		Enum []string `json:"enum"`
	}
}

// sessionMCP is the protocol version of the MCP clients that test
// sessions: the last with them, and with elicitation during a call
// (mcp_tasks_test.go tests 2026-07-28's requests and Tasks).
var sessionMCP = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}

// mcpAsked opens an MCP session (the official Go SDK's client) with
// token whose elicitation handler reports each request on asked and
// replies with reply.
func (e *httpEnv) mcpAsked(ctx context.Context, t *testing.T, token string, asked chan<- elicited, reply *mcp.ElicitResult) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "agentflow-test", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			var schema struct {
				Required   []string `json:"required"`
				Properties struct {
					Answer json.RawMessage `json:"answer"`
				} `json:"properties"`
			}
			raw, err := json.Marshal(req.Params.RequestedSchema)
			if err != nil {
				return nil, err
			}
			if err := json.Unmarshal(raw, &schema); err != nil {
				return nil, err
			}
			got := elicited{Message: req.Params.Message, Required: schema.Required}
			if err := json.Unmarshal(schema.Properties.Answer, &got.Answer); err != nil {
				return nil, fmt.Errorf("the schema's answer property %s: %w", schema.Properties.Answer, err)
			}
			asked <- got
			return reply, nil
		},
	})
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   e.api + mcpdoor.MCPPath,
		HTTPClient: &http.Client{Transport: mcpBearer{token: token, base: http.DefaultTransport}},
	}, sessionMCP)
	require.NoError(t, err)
	t.Cleanup(func() { _ = session.Close() })
	return session
}

// runningTurn is the stream id of the one turn of agentID, other than
// those in except, that runs on the test's task queue, as Temporal's
// visibility lists it (an MCP call's turn has a job id of the gateway's).
func (e *httpEnv) runningTurn(ctx context.Context, t *testing.T, agentID string, except []string) string {
	t.Helper()
	var running []string
	require.Eventually(t, func() bool {
		resp, err := e.Client().ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf(`AgentflowAgent = %q AND TaskQueue = %q AND ExecutionStatus = "Running"`, agentID, e.TaskQueue),
		})
		if err != nil {
			return false
		}
		running = running[:0]
		for _, w := range resp.GetExecutions() {
			if id := w.GetExecution().GetWorkflowId(); !slices.Contains(except, id) {
				running = append(running, id)
			}
		}
		return len(running) == 1
	}, time.Minute, 100*time.Millisecond, "one running turn of %s", agentID)
	return running[0]
}

// logged reports whether the server logged a line about stream that
// holds text.
func (e *httpEnv) logged(stream, text string) bool {
	for _, line := range strings.Split(string(e.log.Bytes()), "\n") {
		if strings.Contains(line, `"stream_id":"`+stream+`"`) && strings.Contains(line, text) {
			return true
		}
	}
	return false
}

// TestAskUserByMCPElicitation: an agent called as an MCP tool asks its
// question of the MCP client (elicitation): the message is the question,
// the schema's answer enumerates the choices. An answer the client
// accepts is the turn's when the caller's token has the question's role,
// and the call ends with the answer the model built from it, recorded as
// the token's holder's. A client that declines leaves the question
// waiting; one whose token lacks the question's role is not asked. Then
// someone who may answer it answers over HTTP.
func TestAskUserByMCPElicitation(t *testing.T) {
	require.Contains(t, askMCPCatalog, "expose: [mcp]")
	e := newHTTPEnvWith(t, func(o *testserver.Options) {
		o.Script, o.Catalogs = askScript, []string{askMCPCatalog, httpCatalogs[1]}
	})

	var streams []string // of the cases run
	for _, tc := range []struct {
		name     string
		prompt   string
		question string
		enum     []string // the elicited schema's answer enum
		reply    *mcp.ElicitResult
		// held, when the elicited reply is not taken: what the server logs
		// of it; then answerer answers over HTTP with answer. unasked: the
		// client is not asked at all, and answerer answers.
		held             string
		unasked          bool
		answerer, answer string
		wantOutput       string
		wantBy           string // the recorded answerer
	}{
		{
			name: "the caller answers", prompt: "Book a trip", question: "Which city?", enum: []string{"Paris", "Rome"},
			reply:      &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "Rome"}},
			wantOutput: "Booked for Rome.", wantBy: "uma",
		},
		{
			name: "the caller declines", prompt: "Book a trip", question: "Which city?", enum: []string{"Paris", "Rome"},
			reply: &mcp.ElicitResult{Action: "decline"},
			held:  "mcp question not answered", answerer: e.user, answer: "Paris",
			wantOutput: "Booked for Paris.", wantBy: "uma",
		},
		{
			name: "the caller lacks the role", prompt: "Ship it", question: "To which address?",
			reply:   &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "12 Rue de la Paix"}},
			unasked: true, answerer: e.approver, answer: "1 Main Street",
			wantOutput: "Booked for 1 Main Street.", wantBy: "ann",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			asked := make(chan elicited, 4)
			session := e.mcpAsked(ctx, t, e.user, asked, tc.reply)
			type called struct {
				res *mcp.CallToolResult
				err error
			}
			done := make(chan called, 1)
			go func() {
				res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "planner", Arguments: map[string]any{"prompt": tc.prompt}})
				done <- called{res, err}
			}()

			if !tc.unasked {
				var got elicited
				select {
				case got = <-asked:
				case c := <-done:
					t.Fatalf("the call ended unasked: %+v, %v", c.res, c.err)
				case <-ctx.Done():
					t.Fatal("the question was not elicited")
				}
				require.Equal(t, tc.question, got.Message)
				require.Equal(t, []string{"answer"}, got.Required)
				require.Equal(t, "string", got.Answer.Type)
				require.Equal(t, tc.enum, got.Answer.Enum)
			}

			if tc.held != "" || tc.unasked {
				stream := e.runningTurn(ctx, t, "planner", streams)
				if tc.held != "" {
					require.Eventually(t, func() bool { return e.logged(stream, tc.held) },
						time.Minute, 50*time.Millisecond, "the server did not log that the elicited answer was not taken")
				}
				q := e.waitQuestion(stream, e.user)
				require.Equal(t, tc.question, q.GetQuestion(), "the question still waits")
				select {
				case c := <-done:
					t.Fatalf("the call ended with the question waiting: %+v, %v", c.res, c.err)
				default:
				}
				var ack pb.AnswerResponse
				e.ok("POST", "/v1/"+stream+"/questions/"+q.GetCallId(), tc.answerer, `{"answer": "`+tc.answer+`"}`, &ack)
				require.Equal(t, agent.QuestionAnswered, ack.GetOutcome())
			}

			var c called
			select {
			case c = <-done:
			case <-ctx.Done():
				t.Fatal("the call did not end")
			}
			require.NoError(t, c.err)
			res := c.res
			require.False(t, res.IsError, "%v", res.Content)
			require.Len(t, res.Content, 1)
			require.Equal(t, tc.wantOutput, res.Content[0].(*mcp.TextContent).Text)
			require.Empty(t, asked, "asked once, or not at all")

			stream, _ := res.Meta["agentflow/stream_id"].(string)
			streams = append(streams, stream)
			job, ok := strings.CutPrefix(stream, "turn/demo/")
			require.True(t, ok, "the turn's stream id: %q", stream)
			recs, err := e.Store().Approvals(ctx, "demo", job)
			require.NoError(t, err)
			require.Len(t, recs, 1)
			require.Equal(t, agent.QuestionAnswered, recs[0].Outcome)
			require.Equal(t, tc.wantBy, recs[0].Approver, "the token's holder")
			require.Equal(t, []string{agent.IssuerStaticToken, tc.wantBy}, []string{recs[0].ApproverIssuer, recs[0].ApproverSubject},
				"where the answerer's identity comes from")
			var answered []string
			for _, ev := range e.events(stream, e.user) {
				if a := ev.GetQuestionAnswered(); a != nil {
					answered = append(answered, a.GetOutcome()+" by "+a.GetAnswerer()+" via "+a.GetVia())
				}
			}
			require.Equal(t, []string{"answered by " + tc.wantBy + " via update"}, answered)
		})
	}
	require.NotContains(t, string(e.log.Bytes()), "12 Rue de la Paix", "answers are not logged")
}

// clickText clicks the element selector finds whose text is text, once
// there is one, in one step of the page's script (as click does).
func (b *chatBrowser) clickText(selector, text string) {
	b.t.Helper()
	script := fmt.Sprintf(`(() => {
		const el = [...document.querySelectorAll(%q)].find((n) => n.textContent === %q);
		if (!el || el.disabled) return false;
		el.click();
		return true;
	})()`, selector, text)
	b.wait(fmt.Sprintf("a %s %q to click", selector, text), func() bool {
		ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](script))
		return err == nil && ok
	})
}

// pageQuestion is what the page shows of the question of its last turn.
type pageQuestion struct {
	Text    string   `json:"text"`
	Choices []string `json:"choices"`
	Field   bool     `json:"field"`
}

// readQuestion reads pageQuestion from the page's DOM.
const readQuestion = `(() => {
	const turns = document.querySelectorAll(".turn");
	const turn = turns[turns.length - 1];
	const q = turn && turn.querySelector(".question");
	if (!q) return {text: "", choices: [], field: false};
	return {
		text: q.querySelector(".question-text").textContent,
		choices: [...q.querySelectorAll("button.choice")].map((b) => b.textContent),
		field: !!q.querySelector(".answer-text"),
	};
})()`

// question is what the page shows of its last turn's question.
func (b *chatBrowser) question() pageQuestion {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	q, err := chromedp.Run(ctx, chromedp.Evaluate[pageQuestion](readQuestion))
	require.NoError(b.t, err)
	return q
}

// TestAskUserInChatPage drives the chat page in headless Chromium: a
// message whose turn asks a question with choices shows the question and
// a button per choice, and no text field; clicking one answers it, as the
// token's holder, and the turn completes with the answer the model built
// from it. A question with no choices shows a text field; a token without
// the question's role is refused, and the question and what was typed
// stay until a token with the role answers. What is typed for one of two
// questions survives the page rendering anew as the other is answered.
func TestAskUserInChatPage(t *testing.T) {
	chromium := testserver.Chromium(t, "the chat page's ask_user test")
	require.Contains(t, askChatScript, "name: plan")
	reviewer := "secret-" + testserver.RandomID() + testserver.RandomID()
	e := newHTTPEnvWith(t, func(o *testserver.Options) {
		o.Script, o.Catalogs = askChatScript, []string{askCatalog, httpCatalogs[1]}
		o.Tokens[reviewer] = "demo:user+approver:rita"
	})
	b := newChatBrowser(t, chromium)
	b.run(chromedp.Navigate(e.api + chatpage.Path))
	b.run(chromedp.SetValue(chromedp.ID("token"), e.user), chromedp.Click(chromedp.ID("use-token")))
	b.waitPage("the planner picked", `document.getElementById("agent").value === "planner"`)

	// Choices: a button each, and the click answers.
	b.run(chromedp.SendKeys(chromedp.ID("prompt"), "Book a trip"), chromedp.Click(chromedp.ID("send")))
	turn := b.waitTurn("the question waiting", func(p pageTurn) bool { return p.Status == "WAITING_INPUT" })
	require.Equal(t, "ask_user", turn.Tool)
	require.Equal(t, "waiting for your answer", turn.ToolState)
	require.Empty(t, turn.Text)
	q := b.question()
	require.Equal(t, pageQuestion{Text: "Which city?", Choices: []string{"Paris", "Rome"}}, q, "no text field: the answer is one of the choices")
	b.clickText(".turn:last-of-type button.choice", "Rome")
	turn = b.waitTurn("the turn completed", func(p pageTurn) bool { return p.Status == "COMPLETED" })
	require.Equal(t, "Booked for Rome.", turn.Text)
	require.Equal(t, "answered by uma", turn.Decided)
	require.Equal(t, "Rome", turn.Output)
	require.Empty(t, turn.Problem)
	q = b.question()
	require.Empty(t, q.Text, "an answered question is no longer asked")
	recs, err := e.Store().Approvals(context.Background(), "demo", turn.Job)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, "uma", recs[0].Approver)

	// No choices: a text field; the user's token may not answer a
	// reviewer's question, a reviewer's may.
	b.run(chromedp.SendKeys(chromedp.ID("prompt"), "Ship it"), chromedp.Click(chromedp.ID("send")))
	turn = b.waitTurn("the reviewer's question", func(p pageTurn) bool { return p.Turns == 2 && p.Status == "WAITING_INPUT" })
	q = b.question()
	require.Equal(t, pageQuestion{Text: "To which address?", Choices: []string{}, Field: true}, q)
	// What was typed stays through the refusal and the change of token.
	b.run(chromedp.SendKeys(".turn:last-of-type .answer-text", "12 Rue de la Paix"))
	b.clickText(".turn:last-of-type .question button", "Answer")
	turn = b.waitTurn("the refusal shown", func(p pageTurn) bool { return p.Problem != "" })
	require.Contains(t, turn.Problem, "needs the role approver")
	require.Contains(t, turn.Problem, "403")
	require.Equal(t, "WAITING_INPUT", turn.Status, "nothing was answered")
	q = b.question()
	require.Equal(t, "To which address?", q.Text, "the question is still asked")
	require.Equal(t, "12 Rue de la Paix", b.eval(`document.querySelector(".turn:last-of-type .answer-text").value`))

	b.run(chromedp.SetValue(chromedp.ID("token"), reviewer), chromedp.Click(chromedp.ID("use-token")))
	b.clickText(".turn:last-of-type .question button", "Answer")
	turn = b.waitTurn("the second turn completed", func(p pageTurn) bool { return p.Turns == 2 && p.Status == "COMPLETED" })
	require.Equal(t, "Booked for 12 Rue de la Paix.", turn.Text)
	require.Equal(t, "answered by rita", turn.Decided)
	require.Empty(t, turn.Problem)

	// Two questions at once: what is typed for one outlives the page
	// rendering anew as the other is answered (by someone else), and the
	// field keeps the focus.
	b.run(chromedp.SendKeys(chromedp.ID("prompt"), "Plan a trip"), chromedp.Click(chromedp.ID("send")))
	b.waitPage("two questions", `document.querySelectorAll(".turn:last-of-type .question").length === 2`)
	turn = b.waitTurn("the third turn waiting", func(p pageTurn) bool { return p.Turns == 3 && p.Status == "WAITING_INPUT" })
	b.run(chromedp.SendKeys(".turn:last-of-type .answer-text", "a sea"))
	stream := contract.TurnWorkflowID("demo", turn.Job)
	var list pb.ListPendingQuestionsResponse
	e.ok("GET", "/v1/"+stream+"/questions", e.user, "", &list)
	require.Len(t, list.GetQuestions(), 2)
	city := list.GetQuestions()[0]
	require.Equal(t, "Which city?", city.GetQuestion())
	var ack pb.AnswerResponse
	e.ok("POST", "/v1/"+stream+"/questions/"+city.GetCallId(), reviewer, `{"answer": "Paris"}`, &ack)
	b.waitPage("the city answered", `document.querySelectorAll(".turn:last-of-type .question").length === 1`)
	b.run(chromedp.KeyEvent(" view"))
	require.Equal(t, "a sea view", b.eval(`document.querySelector(".turn:last-of-type .answer-text").value`),
		"what was typed before the page rendered anew, and after it")
	b.clickText(".turn:last-of-type .question button", "Answer")
	turn = b.waitTurn("the third turn completed", func(p pageTurn) bool { return p.Turns == 3 && p.Status == "COMPLETED" })
	require.Equal(t, "Booked for a sea view.", turn.Text)
	b.noTokenInURLs(e.user, reviewer)
}
