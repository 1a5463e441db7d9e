package agent

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseCodeMode(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want *CodeMode
		err  string
	}{
		{raw: `true`, want: &CodeMode{All: true}},
		{raw: `false`},
		{raw: `null`},
		{raw: `{"tools":["add","$x","_y2"],"time_sec":3,"max_calls":20,"max_output_bytes":100}`,
			want: &CodeMode{Tools: []string{"add", "$x", "_y2"}, TimeSec: 3, MaxCalls: 20, MaxOutputBytes: 100}},
		{raw: `{"tools":[]}`, err: "tools is empty"},
		{raw: `{"tools":["2add"]}`, err: "not a JavaScript identifier"},
		{raw: `{"tools":["a","a"]}`, err: "listed twice"},
		{raw: `{"tools":["a"],"time_sec":-1}`, err: "must not be negative"},
		{raw: `{"tools":["a"],"all":true}`, err: `unknown field "all"`},
		{raw: `"yes"`, err: "want true, or {tools"},
		{raw: `{"tools":["a"]} {}`, err: "one value"},
	} {
		got, err := ParseCodeMode(json.RawMessage(tc.raw))
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.raw)
			require.True(t, IsCode(err, CodeInvalid), tc.raw)
			continue
		}
		require.NoError(t, err, tc.raw)
		require.Equal(t, tc.want, got, tc.raw)
	}
}

func TestProgramSource(t *testing.T) {
	src, err := ProgramSource(`{"program":"return 1"}`)
	require.NoError(t, err)
	require.Equal(t, "return 1", src)
	for _, bad := range []string{`{}`, `{"program":1}`, `not json`, `{"program":null}`} {
		_, err := ProgramSource(bad)
		require.ErrorContains(t, err, `run_program takes {"program": "<JavaScript>"}`, bad)
	}
}

// FuzzParseCodeMode: whatever a catalog writes as code_mode decodes to
// a mode whose names are identifiers listed once and whose limits are
// not negative, or to a clear error; never a panic.
func FuzzParseCodeMode(f *testing.F) {
	for _, s := range []string{`true`, `false`, `null`, `{"tools":["add"]}`, `{"tools":["a","b"],"time_sec":5,"max_calls":9,"max_output_bytes":1}`,
		`{"tools":[]}`, `{"tools":["a-b"]}`, `{"tools":["a"],"max_calls":-3}`, `[]`, `{"tools":["é"]}`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		c, err := ParseCodeMode(json.RawMessage(raw))
		if err != nil {
			require.True(t, IsCode(err, CodeInvalid))
			return
		}
		if c == nil || c.All {
			return
		}
		require.NotEmpty(t, c.Tools)
		seen := map[string]bool{}
		for _, name := range c.Tools {
			require.True(t, jsIdentifier(name), name)
			require.False(t, seen[name], name)
			seen[name] = true
		}
		require.GreaterOrEqual(t, c.TimeSec, 0)
		require.GreaterOrEqual(t, c.MaxCalls, 0)
		require.GreaterOrEqual(t, c.MaxOutputBytes, 0)
	})
}

func TestProgramCallable(t *testing.T) {
	require.True(t, ProgramCallable(Tool{Name: "get_order", Kind: "openapi_action"}))
	require.False(t, ProgramCallable(Tool{Name: "get-order", Kind: "openapi_action"}), "not a JavaScript name")
	require.False(t, ProgramCallable(Tool{Name: "helper", Kind: KindDelegate}))
	require.False(t, ProgramCallable(Tool{Name: "ask", Kind: KindAskUser}))
	require.False(t, ProgramCallable(Tool{Name: RunProgramTool, Kind: "calculator"}))
}
