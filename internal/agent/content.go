package agent

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentflow/agentflow/internal/words"
)

// Part types: what a part of a message, or a block of an answer, holds.
const (
	PartText  = "text"
	PartImage = "image"
	PartFile  = "file"
)

// Block types beyond the part types: an answer's reasoning and its JSON.
const (
	BlockText      = PartText
	BlockImage     = PartImage
	BlockFile      = PartFile
	BlockReasoning = "reasoning"
	BlockJSON      = "json"
)

// Bounds of a request's parts.
const (
	MaxParts         = 16
	MaxPartTextBytes = MaxPromptBytes
	MaxPartURLBytes  = 2048
)

// Part is one piece of a message beside its text: an image or a file a
// person sent with a prompt, or an image a tool produced. Bytes never
// travel in a part: it names them, by a tenant's cas:// ref (uploaded
// with POST /v1/files, or stored by the platform) or, in a request, by an
// http(s) URL that the turn fetches once through the tenant's egress policy
// and keeps as a cas:// ref. A workflow's history therefore holds refs,
// never images.
type Part struct {
	Type string `json:"type"`
	// Text is a text part's text.
	Text string `json:"text,omitempty"`
	// URL is an image's or a file's "cas://sha256:<hex>" ref, or in a
	// request an http(s) URL.
	URL string `json:"url,omitempty"`
	// MIMEType is the media type, e.g. image/png or application/pdf;
	// required for a file, taken from the stored blob when empty.
	MIMEType string `json:"mime_type,omitempty"`
	// Name is a file's name, for people and for the model.
	Name string `json:"name,omitempty"`
}

// ImageTypes are the image media types models take.
var ImageTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// IsImageType reports whether t is one of ImageTypes.
func IsImageType(t string) bool {
	return slices.Contains(ImageTypes, t)
}

// Validate checks a part of a request; at says where it is, for the
// message ("parts[2]").
func (p Part) Validate(at string) error {
	switch p.Type {
	case PartText:
		if strings.TrimSpace(p.Text) == "" {
			return Errorf(CodeInvalid, "%s: a text part needs text", at)
		}
		if len(p.Text) > MaxPartTextBytes || !utf8.ValidString(p.Text) {
			return Errorf(CodeInvalid, "%s: text must be valid UTF-8 of at most %d bytes", at, MaxPartTextBytes)
		}
		if p.URL != "" {
			return Errorf(CodeInvalid, "%s: a text part has no url", at)
		}
	case PartImage, PartFile:
		if p.Text != "" {
			return Errorf(CodeInvalid, "%s: an %s part has no text; send text as a part of type text", at, p.Type)
		}
		if err := checkPartURL(at, p.URL); err != nil {
			return err
		}
		if p.Type == PartImage && p.MIMEType != "" && !IsImageType(p.MIMEType) {
			return Errorf(CodeInvalid, "%s: mime_type %q is not an image type models take (%s)", at, words.Clip(p.MIMEType, 80), strings.Join(ImageTypes, ", "))
		}
		if p.Type == PartFile && p.MIMEType == "" && !strings.HasPrefix(p.URL, CASRefPrefix) {
			return Errorf(CodeInvalid, "%s: a file part by URL needs a mime_type, e.g. application/pdf", at)
		}
	case "":
		return Errorf(CodeInvalid, "%s: type is required: %q, %q or %q", at, PartText, PartImage, PartFile)
	default:
		return Errorf(CodeInvalid, "%s: unknown type %q: want %q, %q or %q", at, words.Clip(p.Type, 40), PartText, PartImage, PartFile)
	}
	if err := validateKey(at+".name", p.Name); err != nil {
		return err
	}
	if len(p.MIMEType) > 100 || strings.ContainsAny(p.MIMEType, " \r\n\t;") {
		return Errorf(CodeInvalid, "%s: mime_type %q: want a media type such as image/png", at, words.Clip(p.MIMEType, 100))
	}
	return nil
}

// checkPartURL accepts a cas:// ref or an https URL; a data: URL is
// refused, since its bytes would be kept in the turn's history.
func checkPartURL(at, raw string) error {
	switch {
	case raw == "":
		return Errorf(CodeInvalid, "%s: url is required: a cas:// ref (upload with POST /v1/files) or an http(s) URL", at)
	case len(raw) > MaxPartURLBytes:
		return Errorf(CodeInvalid, "%s: url is %d bytes; the limit is %d", at, len(raw), MaxPartURLBytes)
	case strings.HasPrefix(raw, CASRefPrefix):
		if _, ok := CASDigest(raw); !ok {
			return Errorf(CodeInvalid, "%s: url %q: want %s<64 lowercase hex digits>", at, words.Clip(raw, 100), CASRefPrefix)
		}
		return nil
	case strings.HasPrefix(strings.ToLower(raw), "data:"):
		return Errorf(CodeInvalid, "%s: data: URLs are not taken (the bytes would be kept in the turn's history): upload the file with POST /v1/files and send its cas:// ref", at)
	}
	// Which hosts and schemes the turn may fetch is the tenant's egress
	// policy's to say, as for its tools; here only the URL's form.
	// url.Parse is deterministic; interning an IPv6 zone is what the
	// checker sees.
	u, err := url.Parse(raw) //workflowcheck:ignore
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return Errorf(CodeInvalid, "%s: url %q: want a cas:// ref or an http(s) URL without credentials", at, words.Clip(raw, 100))
	}
	return nil
}

// CASDigest returns the hex SHA-256 digest of a "cas://sha256:<hex>" ref,
// and whether ref is one: the prefix, then 64 lowercase hex digits.
func CASDigest(ref string) (string, bool) {
	sum, ok := strings.CutPrefix(ref, CASRefPrefix)
	return sum, ok && isLowerHex(sum, 64)
}

func isLowerHex(s string, n int) bool {
	return len(s) == n && !strings.ContainsFunc(s, func(c rune) bool { return (c < '0' || c > '9') && (c < 'a' || c > 'f') })
}

// ValidateParts checks a request's parts.
func ValidateParts(parts []Part) error {
	if len(parts) > MaxParts {
		return Errorf(CodeInvalid, "parts: %d given; the limit is %d", len(parts), MaxParts)
	}
	for i, p := range parts {
		if err := p.Validate(fmt.Sprintf("parts[%d]", i)); err != nil {
			return err
		}
	}
	return nil
}

// Reasoning is one block of what a model thought before it answered,
// stored with its reply. Signature is the provider's seal over the
// block's text (Anthropic's thinking signature): a provider that sets one
// requires the block back, sealed and unchanged, with the rest of the
// conversation when tools are used. Redacted is an encrypted block
// (Anthropic's redacted_thinking) the model reads back but nobody else
// can.
type Reasoning struct {
	Text      string `json:"text,omitempty"`
	Signature string `json:"signature,omitempty"`
	Redacted  string `json:"redacted,omitempty"`
}

// ReasoningText joins the text of reasoning blocks, for people.
func ReasoningText(blocks []Reasoning) string {
	var b strings.Builder
	for _, r := range blocks {
		b.WriteString(r.Text)
	}
	return b.String()
}

// Block is one content block of an answer, in a content event and in a
// TurnResult's Blocks: its text, its reasoning, an image or a file by
// cas:// ref (never inline), or its JSON (an answer that matched the
// turn's output schema).
type Block struct {
	Type     string          `json:"type"`
	Text     string          `json:"text,omitempty"`
	Ref      string          `json:"ref,omitempty"`
	MIMEType string          `json:"mime_type,omitempty"`
	Name     string          `json:"name,omitempty"`
	JSON     json.RawMessage `json:"json,omitempty"`
	// CallID names the tool call that produced an image or a file.
	CallID string `json:"call_id,omitempty"`
	// Partial marks the text of an answer its turn was stopped in
	// (TurnResult.Partial).
	Partial bool `json:"partial,omitempty"`
}

// MaxResultReasoningBytes bounds the reasoning a result's blocks repeat;
// the whole of it stays with the step it belongs to.
const MaxResultReasoningBytes = 16 << 10
