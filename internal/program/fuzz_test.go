package program

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// FuzzRun runs short programs through a real child, then once more with
// their pending calls answered by the fuzzed result: Run never panics,
// never crashes its child, and ends with Done, Pending or an *Error; the
// same input gives the same outcome twice.
func FuzzRun(f *testing.F) {
	for _, src := range []string{
		"return 1",
		"return await tools.get({id: 1})",
		"const [a, b] = await Promise.all([tools.get({id: 1}), tools.add({a: 1, b: 2})]); return {a, b}",
		"try { await tools.get({}) } catch (e) { return e.message }",
		"console.log(input, Date.now(), Math.random()); return input",
		"for (;;) {}",
		"let s = 'x'; for (;;) s += s",
		"await new Promise(() => {})",
		"}); (function() {",
		"return 10n",
		"throw {toString() { throw 1 }}",
		"await tools.get(() => 1)",
		"return new Proxy({}, {ownKeys() { throw 1 }})",
	} {
		f.Add(src, []byte(`{"id":1,"x":[1.5,"é",null]}`))
	}
	f.Add("return await tools.get({id: 1})", []byte(`{`))
	r := New(Options{Memory: 64 << 20, Concurrency: 1})
	f.Cleanup(func() { r.Close() })
	limits := Limits{Time: 100 * time.Millisecond, Calls: 50, Output: 64 << 10}
	f.Fuzz(func(t *testing.T, src string, result []byte) {
		in := Input{Source: src, Tools: tools, Now: now, Seed: 1, Limits: limits}
		if json.Valid(result) {
			in.Input = json.RawMessage(result)
		}
		out := check(t, r, in)
		if out.Done || len(out.Pending) == 0 {
			return
		}
		for _, c := range out.Pending {
			in.Recorded = append(in.Recorded, Recorded{N: c.N, Tool: c.Tool, Args: c.Args, Result: json.RawMessage(result)})
		}
		if !json.Valid(result) {
			_, err := r.Run(t.Context(), in)
			var pe *Error
			require.False(t, errors.As(err, &pe), "a recorded result that is not JSON is the caller's fault: %v", err)
			return
		}
		check(t, r, in)
	})
}

// check runs in twice and requires a well-formed, repeatable outcome.
func check(t *testing.T, r *Runner, in Input) Outcome {
	out, err := r.Run(t.Context(), in)
	if err != nil {
		var pe *Error
		require.ErrorAs(t, err, &pe)
		require.Contains(t, []string{KindSyntax, KindRuntime, KindLimit, KindReplay}, pe.Kind)
		if pe.Kind == KindLimit && (pe.Limit == LimitTime || pe.Limit == LimitMemory) {
			return out // how far a runaway got before it was stopped is not repeatable
		}
		_, again := r.Run(t.Context(), in)
		require.Equal(t, err, again, "the same program fails the same way")
		return out
	}
	require.True(t, out.Done != (len(out.Pending) > 0), "done or pending: %+v", out)
	if out.Done {
		require.True(t, json.Valid(out.Value), "value %q", out.Value)
	}
	again, err := r.Run(t.Context(), in)
	require.NoError(t, err)
	require.Equal(t, out, again, "the same program runs the same way")
	return out
}

// FuzzDeclarations types any schema without panicking, one line a tool.
func FuzzDeclarations(f *testing.F) {
	f.Add(`{"type":"object","properties":{"id":{"type":"string"},"n":{"anyOf":[{"type":"integer"},{"enum":["a",1,null]}]}},"required":["id"]}`)
	f.Add(`{"type":["array","null"],"items":{"type":"array","items":{"const":"x"}}}`)
	f.Add(`{"properties":{"a b":{"description":"*/ done"}}}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, schema string) {
		got := Declarations([]Tool{{Name: "t", Description: schema, Parameters: json.RawMessage(schema)}})
		require.True(t, strings.HasPrefix(got, "declare const tools: {\n"))
		require.True(t, strings.HasSuffix(got, "\n};\n"))
		lines := 3 // the opening, the tool, the closing
		if oneLine(schema) != "" {
			lines++ // its description
		}
		require.Equal(t, lines, strings.Count(got, "\n"), got)
	})
}
