package agent

import (
	"strings"
	"testing"
)

func TestValidateCollectionName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"docs", true},
		{"support-kb_v2.1", true},
		{"9lives", true},
		{"", false},
		{"-docs", false},
		{"Docs", false},
		{"a b", false},
		{"a/b", false},
		{"é", false},
		{strings.Repeat("a", MaxCollectionName), true},
		{strings.Repeat("a", MaxCollectionName+1), false},
	} {
		err := ValidateCollectionName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateCollectionName(%q) = %v, want ok %v", tc.name, err, tc.ok)
		}
		if err != nil && !IsCode(err, CodeInvalid) {
			t.Errorf("ValidateCollectionName(%q): code %s, want invalid", tc.name, ErrorCode(err))
		}
	}
}

func TestValidateMetadata(t *testing.T) {
	many := map[string]string{}
	for i := range MaxMetadataKeys + 1 {
		many[strings.Repeat("k", i+1)] = "v"
	}
	for _, tc := range []struct {
		name string
		md   map[string]string
		want string // "" = valid; else a part of the error
	}{
		{"nil", nil, ""},
		{"plain", map[string]string{"lang": "en", "product.line": "X-1"}, ""},
		{"empty key", map[string]string{"": "x"}, `metadata key ""`},
		{"space in key", map[string]string{"a b": "x"}, `metadata key "a b"`},
		{"long value", map[string]string{"k": strings.Repeat("x", MaxMetadataValue+1)}, "metadata[k] is 513 bytes"},
		{"bad utf-8", map[string]string{"k": "\xff"}, "metadata[k] is not valid UTF-8"},
		{"too many", many, "metadata has 33 keys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateMetadata("metadata", tc.md)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !IsCode(err, CodeInvalid) {
				t.Fatalf("error %v, want invalid containing %q", err, tc.want)
			}
		})
	}
}

func TestCollectionValidate(t *testing.T) {
	good := Collection{Tenant: "demo", Name: "docs", EmbeddingModel: "openai:text-embedding-3-small"}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(*Collection)
		want   string
	}{
		{"no tenant", func(c *Collection) { c.Tenant = "" }, "tenant_id is required"},
		{"bad name", func(c *Collection) { c.Name = "A" }, "collection name"},
		{"no model", func(c *Collection) { c.EmbeddingModel = "" }, "embedding_model is required"},
		{"bad model", func(c *Collection) { c.EmbeddingModel = "gpt" }, "embedding_model"},
		{"negative dims", func(c *Collection) { c.Dims = -1 }, "dims -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.change(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) || !IsCode(err, CodeInvalid) {
				t.Fatalf("error %v, want invalid containing %q", err, tc.want)
			}
		})
	}
}

func TestKnowledgeIDsAndScore(t *testing.T) {
	h := ContentHash("hello")
	if h != "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" {
		t.Fatalf("ContentHash = %s", h)
	}
	if id := DocumentID(h); id != "doc_2cf24dba5fb0a30e26e83b2a" {
		t.Fatalf("DocumentID = %s", id)
	}
	if id := ChunkID("doc_x", 3); id != "doc_x#3" {
		t.Fatalf("ChunkID = %s", id)
	}
	if s := HybridScore(1, 0); s != 1.0/61 {
		t.Fatalf("HybridScore(1, 0) = %v", s)
	}
	if HybridScore(2, 2) <= HybridScore(1, 0) {
		t.Fatal("found by both at rank 2 should beat found by one at rank 1")
	}
	hit := Hit{Chunk: Chunk{ID: "doc_x#3", DocumentID: "doc_x", Position: 3}, DocumentTitle: "X"}
	if c := hit.Citation(); c != (Citation{ChunkID: "doc_x#3", DocumentID: "doc_x", DocumentTitle: "X", Position: 3}) {
		t.Fatalf("Citation = %+v", c)
	}
}
