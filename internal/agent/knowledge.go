package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Knowledge: a tenant's collections of documents, split into chunks that
// are searched by full text and by embedding (internal/knowledge stores
// and searches them). A collection belongs to one tenant; a name is unique
// within its tenant.

// Collection is a named set of documents searched together, embedded by
// one model.
type Collection struct {
	Tenant      string `json:"tenant_id"`
	Name        string `json:"name"` // ValidateCollectionName
	Description string `json:"description,omitempty"`
	// EmbeddingModel is the "provider:model" that embeds its chunks and
	// the queries against it (ParseModel).
	EmbeddingModel string `json:"embedding_model"`
	// Dims is the length of its vectors: given at creation, it is asked of
	// the model (OpenAI's "dimensions"); 0 takes the model's own length,
	// recorded from the first document stored.
	Dims    int       `json:"dims"`
	Created time.Time `json:"created_at"`
}

// Document is one text stored in a collection. Its ID is derived from its
// collection and content hash (DocumentID), so storing the same text twice
// stores it once.
type Document struct {
	ID         string `json:"id"`
	Collection string `json:"collection"`
	Title      string `json:"title,omitempty"`
	// Source says where the text came from (a URL, a file ref, a
	// pipeline's result ref); free text, for people and citations.
	Source   string            `json:"source,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"` // ValidateMetadata; search filters match it exactly
	// ContentHash is "sha256:<hex>" of the document's text (ContentHash).
	ContentHash string    `json:"content_hash"`
	Size        int       `json:"size"`   // bytes of text
	Chunks      int       `json:"chunks"` // how many chunks it was split into
	Created     time.Time `json:"created_at"`
}

// Chunk is a piece of a document's text, the unit that is searched and
// cited. ID is ChunkID(DocumentID, Position).
type Chunk struct {
	ID         string `json:"id"`
	DocumentID string `json:"document_id"`
	Position   int    `json:"position"` // 0-based order within the document
	Text       string `json:"text"`
	Tokens     int    `json:"tokens"` // EstimateTokens(Text)
	// Metadata is the document's, plus "heading" when the chunk lies under
	// a Markdown heading.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Hit is a chunk a search found. Score is the reciprocal-rank fusion of
// the rankers that found it (HybridScore); the ranks say which found it.
type Hit struct {
	Chunk         Chunk   `json:"chunk"`
	DocumentTitle string  `json:"document_title,omitempty"`
	Score         float64 `json:"score"`
	// TextRank and VectorRank are the chunk's 1-based rank by full-text
	// search and by vector similarity; 0: that ranker did not find it.
	TextRank   int `json:"text_rank,omitempty"`
	VectorRank int `json:"vector_rank,omitempty"`
}

// Citation names the chunk an answer relies on, as clients show it.
type Citation struct {
	ChunkID       string `json:"chunk_id"`
	DocumentID    string `json:"document_id"`
	DocumentTitle string `json:"document_title,omitempty"`
	Position      int    `json:"position"`
}

// Citation returns the citation of the hit's chunk.
func (h Hit) Citation() Citation {
	return Citation{ChunkID: h.Chunk.ID, DocumentID: h.Chunk.DocumentID, DocumentTitle: h.DocumentTitle, Position: h.Chunk.Position}
}

// RRFK is the k of reciprocal-rank fusion: a hit's score is the sum over
// the rankers that found it of 1/(RRFK + rank). 60 is the value of the
// paper that introduced it (Cormack et al., 2009) and of most engines.
const RRFK = 60

// HybridScore is the reciprocal-rank fusion score of ranks (1-based; 0 =
// not found by that ranker).
func HybridScore(ranks ...int) float64 {
	var s float64
	for _, r := range ranks {
		if r > 0 {
			s += 1 / float64(RRFK+r)
		}
	}
	return s
}

// ContentHash is the content hash of a document's text: "sha256:<hex>".
func ContentHash(text string) string {
	sum := sha256.Sum256([]byte(text))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// DocumentID is the id of the document with the given content hash in a
// collection: "doc_" and 24 hex digits of the hash. The collection is not
// part of it: ids are looked up within a collection.
func DocumentID(contentHash string) string {
	h := strings.TrimPrefix(contentHash, "sha256:")
	if len(h) > 24 {
		h = h[:24]
	}
	return "doc_" + h
}

// ChunkID is the id of a document's chunk at position: "<document id>#<position>".
func ChunkID(documentID string, position int) string {
	return fmt.Sprintf("%s#%d", documentID, position)
}

// Limits of knowledge names and metadata.
const (
	MaxCollectionName = 64
	MaxDescription    = 1024
	MaxTitle          = 512
	MaxSource         = 2048
	MaxMetadataKeys   = 32
	MaxMetadataKey    = 64
	MaxMetadataValue  = 512
)

// ValidateCollectionName checks a collection name: 1 to 64 bytes of
// lower-case letters, digits, '-', '_' and '.', starting with a letter or
// digit, so that it reads the same in a URL, a catalog and a tool's
// arguments.
func ValidateCollectionName(name string) error {
	if name == "" {
		return Errorf(CodeInvalid, "collection name is required")
	}
	if len(name) > MaxCollectionName {
		return Errorf(CodeInvalid, "collection name is %d bytes; the limit is %d", len(name), MaxCollectionName)
	}
	for i, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '-' || c == '_' || c == '.')
		if !ok {
			return Errorf(CodeInvalid, "collection name %q: use lower-case letters, digits, '-', '_' and '.', starting with a letter or digit", name)
		}
	}
	return nil
}

// ValidateMetadata checks metadata: at most 32 keys of 1 to 64 bytes of
// letters, digits, '-', '_' and '.', and values of valid UTF-8 of at most
// 512 bytes. field names the map in errors ("metadata", "filter").
func ValidateMetadata(field string, m map[string]string) error {
	if len(m) > MaxMetadataKeys {
		return Errorf(CodeInvalid, "%s has %d keys; the limit is %d", field, len(m), MaxMetadataKeys)
	}
	keys := slices.Sorted(maps.Keys(m)) // the first bad key, the same one every time
	for _, k := range keys {
		if k == "" || len(k) > MaxMetadataKey {
			return Errorf(CodeInvalid, "%s key %q: want 1 to %d bytes", field, k, MaxMetadataKey)
		}
		for _, c := range k {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
				return Errorf(CodeInvalid, "%s key %q: use letters, digits, '-', '_' and '.'", field, k)
			}
		}
		v := m[k]
		if len(v) > MaxMetadataValue {
			return Errorf(CodeInvalid, "%s[%s] is %d bytes; the limit is %d", field, k, len(v), MaxMetadataValue)
		}
		if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
			return Errorf(CodeInvalid, "%s[%s] is not valid UTF-8 text", field, k)
		}
	}
	return nil
}

// Validate checks a collection before it is created.
func (c Collection) Validate() error {
	if c.Tenant == "" {
		return Errorf(CodeInvalid, "tenant_id is required")
	}
	if err := ValidateID("tenant_id", c.Tenant); err != nil {
		return err
	}
	if err := ValidateCollectionName(c.Name); err != nil {
		return err
	}
	if len(c.Description) > MaxDescription || !utf8.ValidString(c.Description) {
		return Errorf(CodeInvalid, "description: want valid UTF-8 of at most %d bytes", MaxDescription)
	}
	if c.EmbeddingModel == "" {
		return Errorf(CodeInvalid, "embedding_model is required (\"provider:model\", e.g. openai:text-embedding-3-small)")
	}
	if _, _, err := ParseModel(c.EmbeddingModel); err != nil {
		return Errorf(CodeInvalid, "embedding_model: %s", err.Error())
	}
	if c.Dims < 0 || c.Dims > 16000 {
		return Errorf(CodeInvalid, "dims %d: want 0 (the model's own) to 16000", c.Dims)
	}
	return nil
}

// Validate checks the fields of a document a caller gives (title, source,
// metadata); its id, hash and sizes are computed when it is stored.
func (d Document) Validate() error {
	if len(d.Title) > MaxTitle || !utf8.ValidString(d.Title) {
		return Errorf(CodeInvalid, "title: want valid UTF-8 of at most %d bytes", MaxTitle)
	}
	if len(d.Source) > MaxSource || !utf8.ValidString(d.Source) {
		return Errorf(CodeInvalid, "source: want valid UTF-8 of at most %d bytes", MaxSource)
	}
	return ValidateMetadata("metadata", d.Metadata)
}
