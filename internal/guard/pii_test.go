package guard

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestRedactKinds(t *testing.T) {
	r, err := New(Config{Custom: []Pattern{{Name: "order_id", Regex: `ORD-\d{6}`}}}, []byte("k"))
	require.NoError(t, err)
	tests := []struct {
		name, in, want string
	}{
		{"email", "write to ana.b+x@mail.example.com today", "write to [email] today"},
		{"card with spaces, Luhn", "card 4111 1111 1111 1111 exp 12/29", "card [card] exp 12/29"},
		{"card failing Luhn stays", "ref 4111 1111 1111 1112", "ref 4111 1111 1111 1112"},
		{"iban", "pay to DE89 3704 0044 0532 0130 00 now", "pay to [iban] now"},
		{"iban failing mod 97 stays", "code DE89 3704 0044 0532 0130 02", "code DE89 3704 0044 0532 0130 02"},
		{"phone", "call +33 6 12 34 56 78 or (415) 555-0132", "call [phone] or [phone]"},
		{"ssn", "ssn 123-45-6789", "ssn [ssn]"},
		{"secrets", "keys sk-proj-abcdefghijklmnopqrstuvwx and AKIAIOSFODNN7EXAMPLE", "keys [secret] and [secret]"},
		{"custom", "order ORD-123456 shipped", "order [order_id] shipped"},
		{"arithmetic and dates stay", "What is 12.5 * 4? On 2026-11-25 at 10:30, 3.14159265", "What is 12.5 * 4? On 2026-11-25 at 10:30, 3.14159265"},
		{"nothing", "hello", "hello"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := r.Redact(tt.in, nil)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestRedactModes(t *testing.T) {
	text := "ana@example.com, bo@example.com, ana@example.com; card 4111111111111111"
	hash, err := New(Config{Mode: ModeHash}, []byte("key"))
	require.NoError(t, err)
	got, found := hash.Redact(text, nil)
	require.Len(t, found, 4)
	require.Empty(t, hash.Find(got))
	parts := strings.Split(got, ", ")
	require.Regexp(t, `^\[email:[0-9a-f]{8}\]$`, parts[0])
	require.NotEqual(t, parts[0], parts[1], "two values, two hashes")
	require.True(t, strings.HasPrefix(parts[2], parts[0]), "one value, one hash")
	other, _ := New(Config{Mode: ModeHash}, []byte("another key"))
	got2, _ := other.Redact(text, nil)
	require.NotEqual(t, got, got2, "the hash is keyed")

	ph, err := New(Config{Mode: ModePlaceholder, Reveal: []string{"send_email"}}, nil)
	require.NoError(t, err)
	v := NewVault()
	got, _ = ph.Redact(text, v)
	require.Equal(t, "[EMAIL_1], [EMAIL_2], [EMAIL_1]; card [CARD_1]", got)
	more, _ := ph.Redact("cc bo@example.com and cy@example.com", v)
	require.Equal(t, "cc [EMAIL_2] and [EMAIL_3]", more, "a turn's placeholders are the same for the same value")
	require.Equal(t, text, v.Reveal(got))
	require.Equal(t, "to [EMAIL_9]", v.Reveal("to [EMAIL_9]"), "an unknown placeholder stays")

	// A vault read back from storage goes on numbering where it was.
	back := NewVault()
	for p, val := range v.Entries() {
		back.Put(p, val)
	}
	again, _ := ph.Redact("dee@example.com, ana@example.com", back)
	require.Equal(t, "[EMAIL_4], [EMAIL_1]", again)
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		c    Config
		want string
	}{
		{"unknown kind", Config{Kinds: []string{"passport"}}, `kinds[0]: "passport" is not a kind`},
		{"kind twice", Config{Kinds: []string{"email", "email"}}, `kinds[1]: "email" is listed twice`},
		{"bad regex", Config{Custom: []Pattern{{Name: "x", Regex: "("}}}, "custom[0].regex: error parsing regexp"},
		{"empty match", Config{Custom: []Pattern{{Name: "x", Regex: "a*"}}}, "matches the empty text"},
		{"bad name", Config{Custom: []Pattern{{Name: "X Y", Regex: "a"}}}, `custom[0].name "X Y"`},
		{"built-in name", Config{Custom: []Pattern{{Name: "email", Regex: "a"}}}, "is a built-in kind"},
		{"mode", Config{Mode: "blur"}, `mode "blur"`},
		{"reveal without placeholders", Config{Reveal: []string{"t"}}, "reveal needs mode placeholder"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorContains(t, tt.c.Validate(), tt.want)
		})
	}
	require.NoError(t, Config{Kinds: []string{"email", "card"}, Mode: ModePlaceholder, Reveal: []string{"t"}}.Validate())
}

// FuzzRedact: any text redacts without a panic; what comes out has no
// value the redactor finds, is valid UTF-8 when the input was, and a
// placeholder vault gives the input back.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{"ana@example.com", "4111 1111 1111 1111", "DE89 3704 0044 0532 0130 00", "+1 (415) 555-0132",
		"123-45-6789", "sk-abcdefghijklmnopqrstuvwxyz", "[EMAIL_1] x@y.zz", "", "\xff@a.bc", "a@b.cc.dd@e.ff"} {
		f.Add(s)
	}
	r, err := New(Config{Mode: ModePlaceholder}, nil)
	require.NoError(f, err)
	mask, err := New(Config{}, nil)
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, s string) {
		v := NewVault()
		out, _ := r.Redact(s, v)
		found := r.Find(s)
		for i := 1; i < len(found); i++ {
			require.LessOrEqual(t, found[i-1].End, found[i].Start, "no overlaps")
		}
		if utf8.ValidString(s) {
			require.True(t, utf8.ValidString(out))
		}
		if !strings.Contains(s, "[") {
			require.Equal(t, s, v.Reveal(out), "the vault gives the text back")
		}
		masked, _ := mask.Redact(s, nil)
		require.Empty(t, mask.Find(masked), "a masked text has nothing left to find: %q", masked)
	})
}
