package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// canonicalJSON encodes v so that equal values give equal bytes: embedded
// raw JSON (tool parameters, configs) is re-encoded with sorted keys and
// without insignificant whitespace, and numbers keep their literal form.
// It returns the bytes and their sha256 in hex.
func canonicalJSON(v any) ([]byte, string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, "", fmt.Errorf("encode: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, "", fmt.Errorf("decode: %w", err)
	}
	out, err := json.Marshal(generic)
	if err != nil {
		return nil, "", fmt.Errorf("encode: %w", err)
	}
	sum := sha256.Sum256(out)
	return out, hex.EncodeToString(sum[:]), nil
}
