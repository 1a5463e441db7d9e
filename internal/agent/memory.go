package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Long-term memory: facts an agent keeps about a user beyond one
// conversation, written by the agent (the remember tool) or extracted
// from a conversation after it, recalled by the knowledge search
// (internal/knowledge stores them). A memory belongs to one scope: a
// tenant, an agent and a user, the user being the caller's credential
// (Caller.Principal), never what a request body says.

// MemoryScope is whose memories: the tenant's agent's, about one user.
type MemoryScope struct {
	Tenant  string `json:"tenant_id"`
	AgentID string `json:"agent_id"`
	// User is the caller's Principal: its credential's issuer and
	// subject, or its name.
	User string `json:"user"`
}

// MemoryRecord is one fact kept in a scope. Its ID is derived from the scope
// and the text (MemoryID), so the same fact stored twice is stored once.
type MemoryRecord struct {
	ID      string   `json:"id"`
	AgentID string   `json:"agent_id"`
	Text    string   `json:"text"`
	Tags    []string `json:"tags,omitempty"`
	// Source is how it was written: MemoryRemembered or MemoryExtracted.
	Source string `json:"source"`
	// Origin names what wrote it: the job id of a remember call, or
	// "<session>@<transcript position>" of an extraction.
	Origin  string    `json:"origin,omitempty"`
	Created time.Time `json:"created_at"`
	// Score is the search's (HybridScore) when recalled; 0 when listed.
	Score float64 `json:"score,omitempty"`
}

// Sources of a memory.
const (
	MemoryRemembered = "remember"
	MemoryExtracted  = "extract"
)

// Bounds of memories.
const (
	MaxMemoryBytes = 2000
	MaxMemoryTags  = 8
	MaxMemoryTag   = 32
	// MaxMemoryOrigin bounds Memory.Origin.
	MaxMemoryOrigin = 512
)

// Validate checks a scope before any query runs.
func (s MemoryScope) Validate() error {
	if s.Tenant == "" {
		return Errorf(CodeInvalid, "tenant_id is required")
	}
	if err := ValidateID("tenant_id", s.Tenant); err != nil {
		return err
	}
	if s.AgentID != "" {
		if err := ValidateID("agent_id", s.AgentID); err != nil {
			return err
		}
	}
	if s.User == "" {
		return Errorf(CodeInvalid, "memories need an authenticated caller")
	}
	if len(s.User) > 2*MaxIssuerLength || !utf8.ValidString(s.User) {
		return Errorf(CodeInvalid, "memory user is not a caller's identity")
	}
	return nil
}

// NormalizeMemory trims a memory's text and tags, lower-cases the tags
// and drops repeated ones, and checks them: text of 1 to MaxMemoryBytes
// bytes of UTF-8 text; at most MaxMemoryTags tags of 1 to MaxMemoryTag
// bytes of letters, digits, '-' and '_'.
func NormalizeMemory(text string, tags []string) (string, []string, error) {
	text = strings.TrimSpace(text)
	switch {
	case text == "":
		return "", nil, Errorf(CodeInvalid, "memory text is empty")
	case len(text) > MaxMemoryBytes:
		return "", nil, Errorf(CodeInvalid, "memory text is %d bytes; the limit is %d", len(text), MaxMemoryBytes)
	case !utf8.ValidString(text) || strings.ContainsRune(text, 0):
		return "", nil, Errorf(CodeInvalid, "memory text is not valid UTF-8 text")
	case len(tags) > MaxMemoryTags:
		return "", nil, Errorf(CodeInvalid, "memory has %d tags; the limit is %d", len(tags), MaxMemoryTags)
	}
	var out []string
	for _, t := range tags {
		t = strings.ToLower(strings.TrimSpace(t))
		if t == "" || len(t) > MaxMemoryTag {
			return "", nil, Errorf(CodeInvalid, "memory tag %q: want 1 to %d bytes", t, MaxMemoryTag)
		}
		for _, c := range t {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", nil, Errorf(CodeInvalid, "memory tag %q: use letters, digits, '-' and '_'", t)
			}
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return text, out, nil
}

// MemoryID is the id of a memory of text in scope s (the tenant aside:
// ids are looked up within a tenant): "mem_" and 24 hex digits of the
// SHA-256 of the agent, the user and the text.
func MemoryID(s MemoryScope, text string) string {
	return "mem_" + MemoryHash(s, text)[:24]
}

// MemoryHash is the hex SHA-256 a memory's id is cut from.
func MemoryHash(s MemoryScope, text string) string {
	sum := sha256.Sum256([]byte(s.AgentID + "\x00" + s.User + "\x00" + text))
	return hex.EncodeToString(sum[:])
}

// ValidMemoryID reports whether id has the shape MemoryID gives.
func ValidMemoryID(id string) bool {
	h, ok := strings.CutPrefix(id, "mem_")
	if !ok || len(h) != 24 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

// Defaults and bounds of an agent's memory recall (Memory.TopK, Budget).
const (
	DefaultMemoryTopK   = 5
	MaxMemoryTopK       = 50
	DefaultMemoryBudget = 500
	MaxMemoryBudget     = 8000
)

// RecallTopK is how many memories a turn recalls at most.
func (m Memory) RecallTopK() int {
	return OrDefault(m.TopK, DefaultMemoryTopK)
}

// RecallBudget is the most tokens recalled memories take in a turn.
func (m Memory) RecallBudget() int {
	return OrDefault(m.Budget, DefaultMemoryBudget)
}

// FitMemories keeps the memories, in order, whose text fits within
// budget tokens in all.
func FitMemories(ms []MemoryRecord, budget int) []MemoryRecord {
	var out []MemoryRecord
	used := 0
	for _, m := range ms {
		t := EstimateTokens(m.Text)
		if used+t > budget {
			continue
		}
		used += t
		out = append(out, m)
	}
	return out
}
