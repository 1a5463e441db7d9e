package tools

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSecretRefs(t *testing.T) {
	tests := []struct {
		name, config string
		want         []string
	}{
		{"none", ``, nil},
		{"no secrets", `{"cache_ttl_sec": 0}`, nil},
		{"pipeline credentials", `{"credentials":[{"host":"a","header":"X","secret":"env:B"},{"host":"b","query":"k","secret":"env:A"}]}`, []string{"env:A", "env:B"}},
		{"openapi auth", `{"auth":[{"type":"bearer","secret":"env:CRM_KEY"}],"spec":{"info":{"secret":"env:CRM_KEY"}}}`, []string{"env:CRM_KEY"}},
		{"mcp headers and env", `{"headers":[{"name":"Authorization","secret":"env:GH"}],"env":[{"name":"T","secret":"env:FILES"}]}`, []string{"env:FILES", "env:GH"}},
		{"composite", `{"pipeline":{"pipeline":[]},"credentials":[{"host":"a","header":"X","secret":"env:K"}]}`, []string{"env:K"}},
		{"not a string", `{"secret": 3}`, nil},
		{"not a reference", `{"spec":{"components":{"examples":{"e":{"value":{"secret":"hunter2"}}}}}}`, nil},
		{"not JSON", `{`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, SecretRefs(json.RawMessage(tt.config)))
		})
	}
}
