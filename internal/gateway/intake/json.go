package intake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// What a body's JSON is, and a client's value quoted back: here rather
// than in the core so that the API packages (internal/gateway/*api),
// which the core imports, read and quote as the core and the doors do.

// MaxQuoted is how much of a client's bad value an error quotes back.
const MaxQuoted = 40

// Clip is a client's value quoted for an error message (as %q writes it),
// and shortened: bytes that are not text quote as four characters each,
// so the bound is on the quoted form.
func Clip(v string) string {
	q := strconv.Quote(v)
	if len(q) > 2*MaxQuoted {
		return q[:2*MaxQuoted] + "…"
	}
	return q
}

// JSONKind is the first byte of a JSON value, with every number's as
// '0': '{', '[', '"', 't', 'f', 'n' or '0'; 0 for none.
func JSONKind(raw []byte) byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return 0
	}
	switch c := raw[0]; c {
	case '{', '[', '"', 't', 'f', 'n':
		return c
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return '0'
	}
	return 0
}

// OneJSONValue checks that data is one JSON value and nothing after it.
func OneJSONValue(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("request body is not JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("request body: more after the JSON value, at byte %d", dec.InputOffset())
	}
	return nil
}
