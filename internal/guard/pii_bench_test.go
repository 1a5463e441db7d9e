package guard

import (
	"strings"
	"testing"

	"github.com/agentflow/agentflow/internal/agent"
)

// prompt4k is a prompt of about 4,000 tokens (16 KB at four bytes a
// token) with a few values to find, as a long support conversation has.
func prompt4k() string {
	var b strings.Builder
	for b.Len() < 16000 {
		b.WriteString("The customer wrote again about the order that arrived late, and asked for a refund of the shipping costs. ")
		if b.Len()%5 == 0 {
			b.WriteString("Reach me at ana.lopez@example.com or +33 6 12 34 56 78, card 4111 1111 1111 1111. ")
		}
	}
	return b.String()
}

// BenchmarkRedact4k: the PII redactor over a 4,000-token prompt, by mode
// (placeholder without the vault's round trips to the database).
func BenchmarkRedact4k(b *testing.B) {
	text := prompt4k()
	b.Run("no-pii", func(b *testing.B) {
		clean := strings.Repeat("The customer wrote again about the order that arrived late, and asked for a refund of the shipping costs. ", 150)
		r, err := New(Config{}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(clean)))
		for b.Loop() {
			r.Redact(clean, nil)
		}
	})
	for _, mode := range []string{ModeMask, ModeHash, ModePlaceholder} {
		b.Run(mode, func(b *testing.B) {
			r, err := New(Config{Mode: mode}, []byte("key"))
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				r.Redact(text, NewVault())
			}
		})
	}
}

// BenchmarkOutputStream: the output guard's own cost per streamed word.
func BenchmarkOutputStream(b *testing.B) {
	o, err := NewOutput(agent.OutputGuard{Deny: []string{"launch code", "internal use only"}, Regex: []string{`\b\d{3}-\d{2}-\d{4}\b`}})
	if err != nil {
		b.Fatal(err)
	}
	words := strings.Fields(strings.Repeat("The answer goes on for a while, one word after another. ", 25))
	b.ReportAllocs()
	for b.Loop() {
		s := o.Stream()
		for _, w := range words {
			s.Add(w + " ")
		}
		s.Flush()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(words)), "ns/word")
}
