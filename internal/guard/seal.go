package guard

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
)

// Sealer seals a vault's values with the operator's key (AES-256-GCM), so
// that the table that keeps them holds no PII in the clear. Each value
// is sealed with its place (tenant, scope, placeholder) as additional
// data: a sealed value moved to another place does not open.
type Sealer struct{ aead cipher.AEAD }

// ParseKey reads a vault key: 32 bytes, base64 (standard or URL
// alphabet, padded or not), as AGENTFLOW_VAULT_KEY holds it.
func ParseKey(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil && len(k) == 32 {
			return k, nil
		}
	}
	return nil, errors.New("a vault key is 32 random bytes in base64 (openssl rand -base64 32)")
}

// NewSealer returns a sealer of a 32-byte key.
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("vault key: %d bytes; want 32", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead}, nil
}

// Seal seals a value for its place.
func (s *Sealer) Seal(place, value string) []byte {
	nonce := make([]byte, s.aead.NonceSize())
	_, _ = rand.Read(nonce)
	return s.aead.Seal(nonce, nonce, []byte(value), []byte(place))
}

// Open opens a value sealed for its place.
func (s *Sealer) Open(place string, sealed []byte) (string, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return "", errors.New("sealed value too short")
	}
	out, err := s.aead.Open(nil, sealed[:n], sealed[n:], []byte(place))
	if err != nil {
		return "", errors.New("sealed value does not open with this key")
	}
	return string(out), nil
}
