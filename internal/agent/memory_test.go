package agent

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzNormalizeMemory: a memory's text and tags are either refused with
// an Invalid error or come out trimmed, bounded, valid and without
// repeated tags; its id has the shape ValidMemoryID checks.
func FuzzNormalizeMemory(f *testing.F) {
	f.Add("Ana likes tea", "Drinks,drinks")
	f.Add("  ", "")
	f.Add("a\xffb", "a b")
	f.Add(strings.Repeat("x", MaxMemoryBytes+1), "")
	f.Fuzz(func(t *testing.T, text, tags string) {
		var in []string
		if tags != "" {
			in = strings.Split(tags, ",")
		}
		got, gotTags, err := NormalizeMemory(text, in)
		if err != nil {
			if !IsCode(err, CodeInvalid) {
				t.Fatalf("error %v is not Invalid", err)
			}
			return
		}
		if got == "" || len(got) > MaxMemoryBytes || !utf8.ValidString(got) || got != strings.TrimSpace(got) {
			t.Fatalf("text %q", got)
		}
		seen := map[string]bool{}
		for _, tag := range gotTags {
			if tag == "" || len(tag) > MaxMemoryTag || seen[tag] || strings.ToLower(tag) != tag {
				t.Fatalf("tags %q", gotTags)
			}
			seen[tag] = true
		}
		if id := MemoryID(MemoryScope{Tenant: "t", AgentID: "a", User: "u"}, got); !ValidMemoryID(id) {
			t.Fatalf("id %q", id)
		}
	})
}

func TestValidMemoryID(t *testing.T) {
	for id, want := range map[string]bool{
		"mem_0123456789abcdef01234567": true, "mem_0123": false, "doc_0123456789abcdef01234567": false,
		"mem_0123456789abcdef0123456z": false, "": false,
	} {
		if ValidMemoryID(id) != want {
			t.Errorf("ValidMemoryID(%q) = %v", id, !want)
		}
	}
}
