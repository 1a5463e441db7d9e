package k8sjob

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentflow/agentflow/internal/tools"
)

// output is what the model and the turn get of a finished Job: a line
// that says how it ended and the end of its logs, and the whole Result as
// data (kept by cas:// reference when large).
func output(res Result) (tools.Output, error) {
	data, err := json.Marshal(res)
	if err != nil {
		return tools.Output{}, fmt.Errorf("encode result: %w", err)
	}
	var text strings.Builder
	fmt.Fprintf(&text, "Job %s %s", res.Job, strings.ReplaceAll(res.Status, "_", " "))
	if res.ExitCode != nil {
		fmt.Fprintf(&text, " with exit code %d", *res.ExitCode)
	}
	if res.Reason != "" {
		fmt.Fprintf(&text, " (%s)", res.Reason)
	}
	text.WriteString(".")
	if res.Message != "" {
		text.WriteString(" " + res.Message)
	}
	logs := res.Logs
	if len(logs) > textTail {
		cut := len(logs) - textTail
		for cut < len(logs) && !utf8.RuneStart(logs[cut]) {
			cut++
		}
		logs = "…" + logs[cut:]
	}
	fmt.Fprintf(&text, "\nLogs:\n%s", logs)
	return tools.Output{Text: text.String(), Data: data, ShowData: true}, nil
}
