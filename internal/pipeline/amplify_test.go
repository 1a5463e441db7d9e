package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// wideRow is a row with n fields f1..fn, all null.
func wideRow(n int) map[string]any {
	row := map[string]any{}
	for i := 1; i <= n; i++ {
		row[fmt.Sprintf("f%d", i)] = nil
	}
	return row
}

func fieldNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("f%d", i+1)
	}
	return out
}

// TestStepsThatAmplify: steps whose output can be much larger than their
// input — rows made wider, rows repeated by a join — stop at MaxBytes as
// they build the output, not after: each case's input is under MaxBytes,
// its full output would be 50 to 500 times MaxBytes, and the run may
// allocate no more than a small multiple of MaxBytes.
func TestStepsThatAmplify(t *testing.T) {
	const maxBytes = 256 << 10
	many := func(n int, row func(i int) map[string]any) Value {
		rows := make([]map[string]any, n)
		for i := range rows {
			rows[i] = row(i)
		}
		return TableOf(rows)
	}
	// 20,000 nearly empty rows and one with 255 fields: selecting or
	// grouping by all of them gives every row 256 fields (60 MB of JSON).
	sparse := many(20_000, func(i int) map[string]any { return map[string]any{"id": json.Number(fmt.Sprint(i))} })
	sparse.Table[0] = wideRow(255)
	sparse.Table[0]["id"] = json.Number("0")
	byAll := append([]string{"id"}, fieldNames(255)...)
	byJSON, _ := json.Marshal(byAll)
	selectJSON, _ := json.Marshal(fieldNames(255))
	// One left row of 255 fields that 10,000 right rows match.
	wide := wideRow(255)
	wide["k"] = json.Number("1")
	left := TableOf([]map[string]any{wide})
	right := many(10_000, func(int) map[string]any { return map[string]any{"k": json.Number("1")} })
	// 20,000 empty strings and a pattern of 256 empty groups.
	blank := many(20_000, func(int) map[string]any { return map[string]any{"s": ""} })
	groups := strings.Repeat("()", 256)

	tests := []struct {
		name  string
		in    Value
		steps string
	}{
		{"table_select of fields most rows lack", sparse, `[{"step": "table_select", "fields": ` + string(selectJSON) + `}]`},
		{"groupby fields most rows lack", sparse, `[{"step": "groupby", "by": ` + string(byJSON) + `, "agg": "count"}]`},
		{"join repeating a wide row", left, `[{"step": "join", "right": "right", "on": "k"}]`},
		{"left join repeating a wide row", left, `[{"step": "join", "right": "right", "on": "k", "how": "left"}]`},
		{"regex_extract of many groups", blank, `[{"step": "regex_extract", "field": "s", "pattern": "` + groups + `"}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Decode([]byte(callOn(tt.steps)))
			require.NoError(t, err)
			env := Env{
				Load: func(_ context.Context, ref string) (Value, error) {
					if ref == "right" {
						return right, nil
					}
					return tt.in, nil
				},
				Limits: Limits{MaxBytes: maxBytes},
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err = Run(t.Context(), p, env)
			runtime.ReadMemStats(&after)
			require.ErrorContains(t, err, fmt.Sprintf("the output is over the limit of %d bytes of JSON", maxBytes))
			require.Equal(t, agent.CodeInvalid, agent.ErrorCode(err))
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("allocated %d KiB", alloc>>10)
			require.Less(t, alloc, uint64(32*maxBytes))
		})
	}
}
