package catalog

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/reach"
	"github.com/agentflow/agentflow/internal/tools"
	"github.com/agentflow/agentflow/internal/tools/temporaltool"
)

// TestActivityEntries: an activity tool is delivered at most once unless
// its entry declares that its activity deduplicates, and reconciles only
// with a read the runtime runs.
func TestActivityEntries(t *testing.T) {
	allow, err := reach.Parse("demo=task_queue:billing+activity:*")
	require.NoError(t, err)
	kinds, err := tools.NewRegistry(tools.Deps{}, append(tools.Builtin(), temporaltool.Kinds(allow)...)...)
	require.NoError(t, err)
	const head = "tenant: demo\ntools:\n  - name: look\n    kind: calculator\n  - name: refund\n    kind: activity\n"
	for _, tc := range []struct{ name, entry, err string }{
		{name: "at most once", entry: "    config: {task_queue: billing, activity_type: Refund}\n"},
		{name: "retried, deduplicated", entry: "    delivery: idempotent\n    config: {task_queue: billing, activity_type: Refund, max_attempts: 4}\n"},
		{name: "retried, not deduplicated", entry: "    config: {task_queue: billing, activity_type: Refund, max_attempts: 4}\n",
			err: "max_attempts 4 sends a call again after an attempt that may have taken effect: declare delivery: idempotent"},
		{name: "reconciled by a read", entry: "    delivery: reconciled\n    reconcile: {tool: look, arguments: '{expression: \"1\"}', found: 'true'}\n    config: {task_queue: billing, activity_type: Refund}\n"},
		{name: "reconciled by itself", entry: "    delivery: reconciled\n    reconcile: {arguments: '.', found: 'true'}\n    config: {task_queue: billing, activity_type: Refund}\n",
			err: "t.yaml:5: tools[1].name: a tool of kind activity reads with another tool"},
		{name: "queue outside the operator's list", entry: "    config: {task_queue: payroll, activity_type: Refund}\n",
			err: `config.task_queue: task_queue "payroll" is not open to tenant "demo"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(kinds, "t.yaml", []byte(head+tc.entry))
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.err)
		})
	}
	_, err = Parse(kinds, "t.yaml", []byte(strings.Replace(head, "kind: calculator", "kind: activity\n    config: {task_queue: billing, activity_type: Look}", 1)+
		"    delivery: reconciled\n    reconcile: {tool: look, arguments: '.', found: 'true'}\n    config: {task_queue: billing, activity_type: Refund}\n"))
	require.ErrorContains(t, err, `tool "look" is of kind activity, whose calls the turn schedules: a read must be a tool the runtime runs`)
}
