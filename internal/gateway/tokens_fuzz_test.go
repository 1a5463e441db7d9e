package gateway

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// FuzzParseTokens: any AGENTFLOW_TOKENS value is tokens, each with a
// tenant and roles, or an error, never a panic.
func FuzzParseTokens(f *testing.F) {
	for _, s := range []string{"tok=demo", "tok=demo:user+admin:ana,t2=other", "sha256:" + "00" + "=demo", "=demo", "tok=", "tok=demo:root", "tok=demo:user+supervisor:bo"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		toks, err := ParseTokens(v)
		if err != nil {
			require.NotEmpty(t, err.Error())
			return
		}
		for _, tok := range toks {
			require.NotEmpty(t, tok.Tenant)
			require.NotEmpty(t, tok.Roles)
			// What a token says of its holder is what turns carry as
			// their caller: it must pass a turn's validation.
			req := agent.TurnRequest{TenantID: tok.Tenant, Prompt: "p", Caller: tok.Caller()}
			require.NoError(t, req.Validate())
		}
	})
}
