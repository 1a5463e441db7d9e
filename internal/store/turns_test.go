package store_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/store"
)

func demoTurn(jobID string) store.Turn {
	return store.Turn{
		TenantID: "demo", JobID: jobID, WorkflowID: "turn/demo/" + jobID,
		AgentID: "assistant", AgentVersion: 2, SessionID: "sess-1",
		Request: agent.TurnRequest{
			Version: agent.ProtocolVersion, JobID: jobID, TenantID: "demo", SessionID: "sess-1",
			Prompt: "What is 12.5 * 4?", History: agent.HistoryLoad,
			Context: agent.TurnContext{UserRole: "admin", Metadata: map[string]string{"k": "v"}},
		},
	}
}

func TestBeginTurn(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	first := demoTurn("job-1")
	require.NoError(t, s.BeginTurn(ctx, first))

	tests := []struct {
		name   string
		mutate func(*store.Turn)
		code   agent.Code // "" = succeeds as a no-op
	}{
		{name: "retry", mutate: func(*store.Turn) {}},
		{name: "retry with a newer agent version keeps the first", mutate: func(tt *store.Turn) { tt.AgentVersion = 3 }},
		{name: "another workflow", mutate: func(tt *store.Turn) { tt.WorkflowID = "turn/demo/other" }, code: agent.CodeConflict},
		{name: "another agent", mutate: func(tt *store.Turn) { tt.AgentID = "ops" }, code: agent.CodeConflict},
		{name: "another request", mutate: func(tt *store.Turn) { tt.Request.Prompt = "What is 6 * 7?" }, code: agent.CodeConflict},
		{name: "another request, another workflow", mutate: func(tt *store.Turn) {
			tt.Request.Context.UserRole, tt.WorkflowID = "supervisor", "turn/demo/other"
		}, code: agent.CodeConflict},
		{name: "the same request with another delivery", mutate: func(tt *store.Turn) {
			no := false
			tt.Request.Stream, tt.Request.Version, tt.Request.History = &no, "", ""
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			turn := demoTurn("job-1")
			tt.mutate(&turn)
			err := s.BeginTurn(ctx, turn)
			if tt.code == "" {
				require.NoError(t, err)
			} else {
				requireCode(t, err, tt.code)
			}
			require.Equal(t, 1, count(t, s, "SELECT count(*) FROM turns"))
			got, err := s.Turn(ctx, "demo", "job-1")
			require.NoError(t, err)
			require.Equal(t, first, got)
		})
	}

	// The same job id in another tenant is another turn.
	other := demoTurn("job-1")
	other.TenantID, other.Request.TenantID, other.WorkflowID = "acme", "acme", "turn/acme/job-1"
	require.NoError(t, s.BeginTurn(ctx, other))
	got, err := s.Turn(ctx, "acme", "job-1")
	require.NoError(t, err)
	require.Equal(t, "turn/acme/job-1", got.WorkflowID)
	_, err = s.Turn(ctx, "demo", "job-2")
	requireCode(t, err, agent.CodeNotFound)
}

// TestBeginTurnConcurrentRequests: ten requests begun at once under one
// job id, each by its own workflow: one claims the job, nine are refused.
func TestBeginTurnConcurrentRequests(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	const n = 10
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			turn := demoTurn("job-1")
			turn.WorkflowID = fmt.Sprintf("manual-%d", i)
			turn.Request.Prompt = fmt.Sprintf("What is %d * 4?", i)
			errs[i] = s.BeginTurn(ctx, turn)
		})
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, won, "two requests claimed the job")
			won = i
			continue
		}
		requireCode(t, err, agent.CodeConflict)
	}
	require.NotEqual(t, -1, won)
	got, err := s.Turn(ctx, "demo", "job-1")
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("What is %d * 4?", won), got.Request.Prompt)
}

// TestBeginTurnWithPrompt: a turn's prompt is stored as step 0 with its
// claim — in the claim's statement for a new turn, after the check for a
// retry or a counted rate — and only under the turn's own claim: a retry
// keeps the first prompt, and a request refused as another's stores none.
func TestBeginTurnWithPrompt(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	withPrompt := func(jobID, prompt string, perMinute int) store.Turn {
		turn := demoTurn(jobID)
		turn.Request.Prompt, turn.TurnsPerMinute = prompt, perMinute
		turn.Prompt = &agent.Message{Role: agent.RoleUser, Content: prompt}
		return turn
	}
	steps := func(jobID string) []agent.Message {
		got, err := s.Steps(ctx, "demo", jobID)
		require.NoError(t, err)
		return got
	}
	tests := []struct {
		name      string
		perMinute int
	}{
		{"one statement", 0},
		{"a counted rate", 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := "prompt-" + tt.name
			require.NoError(t, s.BeginTurn(ctx, withPrompt(job, "What is 12.5 * 4?", tt.perMinute)))
			want := []agent.Message{{Role: agent.RoleUser, Content: "What is 12.5 * 4?"}}
			require.Equal(t, want, steps(job))

			// A retry of the same request: the claim and the prompt stand.
			require.NoError(t, s.BeginTurn(ctx, withPrompt(job, "What is 12.5 * 4?", tt.perMinute)))
			require.Equal(t, want, steps(job))

			// Another request under the job id: refused, nothing stored.
			requireCode(t, s.BeginTurn(ctx, withPrompt(job, "What is 6 * 7?", tt.perMinute)), agent.CodeConflict)
			require.Equal(t, want, steps(job))
		})
	}

	// A claim stored without its prompt (a worker lost between the two, in
	// an earlier version): the retry stores the prompt.
	require.NoError(t, s.BeginTurn(ctx, demoTurn("claimed-only")))
	require.Empty(t, steps("claimed-only"))
	turn := demoTurn("claimed-only")
	turn.Prompt = &agent.Message{Role: agent.RoleUser, Content: turn.Request.Prompt}
	require.NoError(t, s.BeginTurn(ctx, turn))
	require.Equal(t, []agent.Message{*turn.Prompt}, steps("claimed-only"))
}

func TestSteps(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()

	err := s.PutStep(ctx, "demo", "job-1", 0, agent.Message{Role: agent.RoleUser, Content: "hi"})
	requireCode(t, err, agent.CodeNotFound)

	require.NoError(t, s.BeginTurn(ctx, demoTurn("job-1")))
	msgs := []agent.Message{
		{Role: agent.RoleUser, Content: "What is 12.5 * 4?"},
		{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "c1", Name: "calculator", Arguments: `{"expression":"12.5*4"}`}}},
		{Role: agent.RoleTool, ToolCallID: "c1", Name: "calculator", Content: "50"},
		{Role: agent.RoleAssistant, Content: "12.5 * 4 = 50"},
	}
	// Out of order, as parallel tool activities may finish.
	for _, seq := range []int{2, 0, 3, 1} {
		require.NoError(t, s.PutStep(ctx, "demo", "job-1", seq, msgs[seq]))
	}
	// Retries, even with different content, keep the first write.
	for seq := range msgs {
		require.NoError(t, s.PutStep(ctx, "demo", "job-1", seq, agent.Message{Role: agent.RoleUser, Content: "rewritten"}))
	}
	got, err := s.Steps(ctx, "demo", "job-1")
	require.NoError(t, err)
	require.Equal(t, msgs, got)
	require.Equal(t, len(msgs), count(t, s, "SELECT count(*) FROM turn_steps"))

	none, err := s.Steps(ctx, "acme", "job-1")
	require.NoError(t, err)
	require.Empty(t, none)

	one, err := s.Step(ctx, "demo", "job-1", 2)
	require.NoError(t, err)
	require.Equal(t, msgs[2], one)
	_, err = s.Step(ctx, "demo", "job-1", 9)
	requireCode(t, err, agent.CodeNotFound)
	_, err = s.Step(ctx, "acme", "job-1", 2)
	requireCode(t, err, agent.CodeNotFound)

	// A step is replaced only while it holds what its replacer read.
	resent := agent.Message{Role: agent.RoleTool, ToolCallID: "c1", Name: "calculator", Content: "50, sent again"}
	ok, err := s.ReplaceStep(ctx, "demo", "job-1", 2, "not what it holds", resent)
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = s.ReplaceStep(ctx, "demo", "job-1", 2, "50", resent)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = s.ReplaceStep(ctx, "demo", "job-1", 2, "50", msgs[2])
	require.NoError(t, err)
	require.False(t, ok, "another replacer came first")
	ok, err = s.ReplaceStep(ctx, "demo", "job-1", 9, "", resent)
	require.NoError(t, err)
	require.False(t, ok, "no step to replace")
	one, err = s.Step(ctx, "demo", "job-1", 2)
	require.NoError(t, err)
	require.Equal(t, resent, one)
}

func TestAppendSession(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	turn1 := []agent.Message{{Role: agent.RoleUser, Content: "q1"}, {Role: agent.RoleAssistant, Content: "a1"}}
	turn2 := []agent.Message{{Role: agent.RoleUser, Content: "q2"}, {Role: agent.RoleAssistant, Content: "a2"}}
	all := append(append([]agent.Message{}, turn1...), turn2...)

	steps := []struct {
		name  string
		job   string
		msgs  []agent.Message
		total int
	}{
		{"first turn", "job-1", turn1, 2},
		{"retry of the first turn", "job-1", turn1, 2},
		{"retry with other messages appends nothing", "job-1", turn2, 2},
		{"second turn", "job-2", turn2, 4},
		{"retry of the second turn", "job-2", turn2, 4},
		{"nothing to append", "job-3", nil, 4},
	}
	for _, st := range steps {
		require.NoError(t, s.AppendSession(ctx, "demo", "sess-1", st.job, st.msgs), st.name)
		got, err := s.SessionMessages(ctx, "demo", "sess-1", 0)
		require.NoError(t, err, st.name)
		require.Equal(t, all[:st.total], got, st.name)
	}

	limits := []struct {
		limit int
		want  []agent.Message
	}{
		{0, all}, {1, all[3:]}, {3, all[1:]}, {4, all}, {100, all},
	}
	for _, l := range limits {
		got, err := s.SessionMessages(ctx, "demo", "sess-1", l.limit)
		require.NoError(t, err)
		require.Equal(t, l.want, got, "limit %d", l.limit)
	}

	for _, key := range [][2]string{{"acme", "sess-1"}, {"demo", "sess-2"}} {
		got, err := s.SessionMessages(ctx, key[0], key[1], 0)
		require.NoError(t, err)
		require.Empty(t, got)
	}
}

func TestAppendSessionConcurrent(t *testing.T) {
	t.Parallel()
	// Five turns of one session, each appended three times at once: every
	// turn lands once, contiguously, with gap-free sequence numbers.
	s := open(t, store.Options{})
	ctx := t.Context()
	const jobs, attempts = 5, 3
	var wg sync.WaitGroup
	errs := make(chan error, jobs*attempts)
	for j := range jobs {
		msgs := []agent.Message{
			{Role: agent.RoleUser, Content: fmt.Sprintf("q%d", j)},
			{Role: agent.RoleAssistant, Content: fmt.Sprintf("a%d", j)},
		}
		for range attempts {
			wg.Go(func() { errs <- s.AppendSession(ctx, "demo", "sess-1", fmt.Sprintf("job-%d", j), msgs) })
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	got, err := s.SessionMessages(ctx, "demo", "sess-1", 0)
	require.NoError(t, err)
	require.Len(t, got, 2*jobs)
	seen := map[string]bool{}
	for i := 0; i < len(got); i += 2 {
		q, a := got[i].Content, got[i+1].Content
		require.Equal(t, "a"+q[1:], a, "a turn's messages stay together")
		require.False(t, seen[q], "turn %s appended twice", q)
		seen[q] = true
	}
	require.Equal(t, 2*jobs, count(t, s, "SELECT max(seq) FROM session_messages"))
	require.Equal(t, 2*jobs, count(t, s, "SELECT last_seq FROM sessions"))
}

func TestBeginTurnRateLimit(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	turn := func(job string) store.Turn {
		tt := demoTurn(job)
		tt.AgentID, tt.TurnsPerMinute = "limited", 2
		return tt
	}
	require.NoError(t, s.BeginTurn(ctx, turn("rl-1")))
	require.NoError(t, s.BeginTurn(ctx, turn("rl-2")))
	err := s.BeginTurn(ctx, turn("rl-3"))
	require.True(t, agent.IsCode(err, agent.CodeRateLimited), "%v", err)
	require.ErrorContains(t, err, `agent "limited" of tenant "demo" allows 2 turns a minute`)
	require.NoError(t, s.BeginTurn(ctx, turn("rl-2")), "a retry of a begun turn is not a new turn")
	_, err = s.Turn(ctx, "demo", "rl-3")
	require.True(t, agent.IsCode(err, agent.CodeNotFound), "the refused turn left nothing")

	other := turn("rl-4")
	other.AgentID = "unlimited"
	other.TurnsPerMinute = 0
	require.NoError(t, s.BeginTurn(ctx, other), "the cap is per agent")
}

// TestForkSession: a fork starts a new session with the transcript up to
// a turn — through it, or before it — and leaves the original as it was;
// a turn the session does not have, an existing session, another
// tenant's session or the session itself as the fork are refused, and
// nothing is written.
func TestForkSession(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	exchange := func(n int) []agent.Message {
		return []agent.Message{{Role: agent.RoleUser, Content: fmt.Sprintf("question %d", n)}, {Role: agent.RoleAssistant, Content: fmt.Sprintf("answer %d", n)}}
	}
	for n := 1; n <= 3; n++ {
		require.NoError(t, s.AppendSession(ctx, "demo", "orig", fmt.Sprintf("orig-%d", n), exchange(n)))
	}
	contents := func(session string) []string {
		msgs, err := s.SessionMessages(ctx, "demo", session, 0)
		require.NoError(t, err)
		var out []string
		for _, m := range msgs {
			out = append(out, m.Content)
		}
		return out
	}

	n, prompt, err := s.ForkSession(ctx, store.Fork{TenantID: "demo", From: "orig", To: "through", JobID: "orig-2"})
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.Equal(t, "question 2", prompt)
	require.Equal(t, []string{"question 1", "answer 1", "question 2", "answer 2"}, contents("through"))
	n, _, err = s.ForkSession(ctx, store.Fork{TenantID: "demo", From: "orig", To: "before", JobID: "orig-2", Before: true})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, []string{"question 1", "answer 1"}, contents("before"))
	require.Len(t, contents("orig"), 6, "the original is unchanged")

	// The fork goes on as a session of its own.
	require.NoError(t, s.AppendSession(ctx, "demo", "before", "before-1", exchange(9)))
	require.Equal(t, []string{"question 1", "answer 1", "question 9", "answer 9"}, contents("before"))

	for _, tc := range []struct {
		name string
		fork store.Fork
		code agent.Code
	}{
		{"a turn the session does not have", store.Fork{TenantID: "demo", From: "orig", To: "x1", JobID: "orig-7"}, agent.CodeNotFound},
		{"another tenant's session", store.Fork{TenantID: "acme", From: "orig", To: "x2", JobID: "orig-1"}, agent.CodeNotFound},
		{"an existing session", store.Fork{TenantID: "demo", From: "orig", To: "through", JobID: "orig-1"}, agent.CodeConflict},
		{"the session itself", store.Fork{TenantID: "demo", From: "orig", To: "orig", JobID: "orig-1"}, agent.CodeInvalid},
		{"no new session id", store.Fork{TenantID: "demo", From: "orig", JobID: "orig-1"}, agent.CodeInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.ForkSession(ctx, tc.fork)
			requireCode(t, err, tc.code)
		})
	}
	require.Empty(t, contents("x1"))
	require.Empty(t, contents("x2"))
	require.Len(t, contents("through"), 4, "an existing session is left as it was")
}

// TestSessionSummary: a session's summary only advances — a retry, or a
// slower writer with an older one, changes nothing and is not counted
// again — and the memory read is the summary and the messages after it.
func TestSessionSummary(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	for n := 1; n <= 3; n++ {
		require.NoError(t, s.AppendSession(ctx, "demo", "mem", fmt.Sprintf("mem-%d", n),
			[]agent.Message{{Role: agent.RoleUser, Content: fmt.Sprintf("q%d", n)}, {Role: agent.RoleAssistant, Content: fmt.Sprintf("a%d", n)}}))
	}
	call := func(through int64, attempt int) store.ModelCall {
		return store.ModelCall{TenantID: "demo", SessionID: "mem", JobID: fmt.Sprintf("summary:mem:%d", through), Attempt: attempt,
			AgentID: "a", AgentVersion: 1, Model: "openai:gpt-4o-mini", Usage: agent.Usage{PromptTokens: 10, CompletionTokens: 5}}
	}
	stored, err := s.PutSummary(ctx, store.Summary{Text: "first two exchanges", Through: 4, Call: call(4, 1)})
	require.NoError(t, err)
	require.True(t, stored)
	for _, again := range []store.Summary{
		{Text: "first two exchanges", Through: 4, Call: call(4, 2)}, // a retry
		{Text: "first exchange", Through: 2, Call: call(2, 1)},      // an older one
	} {
		stored, err := s.PutSummary(ctx, again)
		require.NoError(t, err)
		require.False(t, stored)
	}
	mem, err := s.SessionMemory(ctx, "demo", "mem", 10)
	require.NoError(t, err)
	require.Equal(t, "first two exchanges", mem.Summary)
	require.Equal(t, int64(4), mem.SummarySeq)
	require.Len(t, mem.Recent, 2)
	require.Equal(t, "q3", mem.Recent[0].Content)
	require.Equal(t, int64(5), mem.Recent[0].Seq)
	require.Equal(t, 1, count(t, s, "SELECT count(*) FROM usage_ledger WHERE job_id LIKE 'summary:mem:%'"), "counted once")

	mem, err = s.SessionMemory(ctx, "demo", "none", 10)
	require.NoError(t, err)
	require.Empty(t, mem.Summary)
	require.Empty(t, mem.Recent)
}
