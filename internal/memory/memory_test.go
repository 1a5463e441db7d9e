package memory

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// FuzzParseFacts: whatever a model answers, the facts read from it are
// at most MaxExtracted valid memory texts, and reading never panics.
func FuzzParseFacts(f *testing.F) {
	for _, s := range []string{`["a", "b"]`, "Sure:\n```json\n[\"x\"]\n```", `[1, "a"]`, `][`, `["` + strings.Repeat("a", 3000) + `"]`, `["\u0000"]`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, answer string) {
		facts := ParseFacts(answer)
		require.LessOrEqual(t, len(facts), MaxExtracted)
		for _, fact := range facts {
			text, _, err := agent.NormalizeMemory(fact, nil)
			require.NoError(t, err)
			require.Equal(t, fact, text)
		}
	})
}

// TestFold: a session that fits folds nothing; one that does not keeps
// the latest messages that fill half the window, from a user message on,
// and folds the rest.
func TestFold(t *testing.T) {
	msg := func(role agent.Role, words int) agent.Message {
		return agent.Message{Role: role, Content: strings.Repeat("word ", words)}
	}
	u, a := agent.RoleUser, agent.RoleAssistant
	tokens := agent.EstimateTokens(msg(u, 100).Content) // one message's cost
	six := []agent.Message{msg(u, 100), msg(a, 100), msg(u, 100), msg(a, 100), msg(u, 100), msg(a, 100)}
	for _, tc := range []struct {
		name   string
		msgs   []agent.Message
		window int
		fold   int // how many of the oldest are folded
	}{
		{"fits", six, 6 * tokens, 0},
		{"half the window kept", six, 4 * tokens, 4},
		{"an answer alone is not kept", six, 5 * tokens, 4},
		{"nothing fits half the window", six, tokens, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fold := Fold(tc.msgs, tc.window)
			require.Len(t, fold, tc.fold)
			if tc.fold > 0 {
				require.Equal(t, tc.msgs[:tc.fold], fold)
			}
		})
	}
}

// TestPrompts: each message is a line of its role and text, cut (and
// marked) past maxLine bytes.
func TestPrompts(t *testing.T) {
	msgs := []agent.Message{{Role: agent.RoleUser, Content: "I like green tea"}, {Role: agent.RoleAssistant, Content: strings.Repeat("x", maxLine+10)}}
	fold := FoldPrompt("", msgs)
	require.Contains(t, fold, "Summary so far:\n(none yet)\n\nNew messages:\nuser: I like green tea\n")
	require.Contains(t, fold, "assistant: "+strings.Repeat("x", maxLine)+"…\n")
	tr := ExtractionTranscript("Ana lives in Lisbon.", msgs[:1])
	require.Equal(t, "Summary of the earlier conversation:\nAna lives in Lisbon.\n\nConversation:\nuser: I like green tea\n", tr)
	require.Equal(t, "Conversation:\nuser: I like green tea\n", ExtractionTranscript("", msgs[:1]))
}
