package codebase

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTreeKeepsRules: agentflow's own tree breaks none of its rules. A
// break names the file, the line and the rule; split a file by concern,
// a function into named steps, and move an import to where the rules
// say it belongs.
func TestTreeKeepsRules(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	got, err := Check(root, Agentflow)
	require.NoError(t, err)
	if len(got) > 0 {
		var b strings.Builder
		for _, v := range got {
			b.WriteString(v.String() + "\n")
		}
		t.Fatalf("%d breaks of the tree's rules:\n%s", len(got), b.String())
	}
	n, err := Lines(root)
	require.NoError(t, err)
	t.Logf("%d hand-written non-test lines", n)
}

// TestRulesCatchBreaks: each rule fails on a tree that breaks it
// (testdata/broken: a file over the size, a function over it, a domain
// package importing the store, a door importing another) and holds on
// one that keeps it (testdata/kept, whose nested module is not its own
// code however long its files).
func TestRulesCatchBreaks(t *testing.T) {
	rules := Rules{
		Module: "example.com/m", MaxFileLines: 30, MaxFuncLines: 8,
		Imports: []ImportRule{
			{From: "agent", Not: []string{"store/..."}, Why: "domain types import no adapter"},
			{From: "doors/a", Not: []string{"doors/b"}, Why: "no door imports another"},
		},
	}
	tests := []struct {
		tree string
		want []string
	}{
		{"kept", nil},
		{"broken", []string{
			"agent/agent.go:3: agent imports example.com/m/store: domain types import no adapter",
			"doors/a/a.go:3: doors/a imports example.com/m/doors/b: no door imports another",
			"long/long.go:1: file of 31 lines, over 30: split it by concern",
			"long/long.go:5: func tooLong of 9 lines, over 8",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.tree, func(t *testing.T) {
			got, err := Check(filepath.Join("testdata", tt.tree), rules)
			require.NoError(t, err)
			var lines []string
			for _, v := range got {
				lines = append(lines, v.String())
			}
			require.Equal(t, tt.want, lines)
		})
	}
}

// TestLines counts non-blank lines of hand-written non-test files only:
// a generated file and a test file in the tree are not counted.
func TestLines(t *testing.T) {
	n, err := Lines(filepath.Join("testdata", "kept"))
	require.NoError(t, err)
	require.Equal(t, 7, n)
}

// TestTreeKeepsLinkRules: the binaries and central packages link only
// what AgentflowLinks allows.
func TestTreeKeepsLinkRules(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	for _, rule := range AgentflowLinks {
		t.Run(rule.Root, func(t *testing.T) {
			breaks, err := Links(root, Agentflow.Module, rule)
			require.NoError(t, err)
			require.Empty(t, breaks)
		})
	}
}

// TestLinkRuleCatchesBreaks: a link rule finds what a package links
// through another, with the chain, and leaves the imports of a package
// it goes through unfollowed; Only finds anything not listed.
func TestLinkRuleCatchesBreaks(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	breaks, err := Links(root, Agentflow.Module, LinkRule{Root: "internal/tenant", Never: []string{"internal/effects"}, Why: "test"})
	require.NoError(t, err)
	require.Equal(t, []string{"internal/tenant links internal/effects (internal/tenant → internal/egress → internal/effects): test"}, breaks)
	breaks, err = Links(root, Agentflow.Module, LinkRule{Root: "internal/tenant", Never: []string{"internal/effects"},
		Through: []string{"internal/egress", "internal/store", "internal/tools"}})
	require.NoError(t, err)
	require.Empty(t, breaks)
	// Only: memory links the domain package (and its words) beside the
	// standard library.
	breaks, err = Links(root, Agentflow.Module, LinkRule{Root: "internal/memory", Only: []string{"internal/words"}, Why: "test"})
	require.NoError(t, err)
	require.Equal(t, []string{"internal/memory links internal/agent (internal/memory → internal/agent): test"}, breaks)
	breaks, err = Links(root, Agentflow.Module, LinkRule{Root: "internal/memory", Only: []string{"internal/agent", "internal/words"}})
	require.NoError(t, err)
	require.Empty(t, breaks)
}
