package scripted

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// setURL records a part sent by URL: a data: URL as its decoded bytes and
// media type, any other URL as it is.
func (p *Part) setURL(u string) error {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		p.URL = u
		return nil
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok {
		return errors.New("data: URL without a comma")
	}
	isBase64 := false
	if m, found := strings.CutSuffix(meta, ";base64"); found {
		meta, isBase64 = m, true
	}
	mime, _, _ := strings.Cut(meta, ";")
	if isBase64 {
		return p.setBase64(data, mime)
	}
	raw, err := url.PathUnescape(data)
	if err != nil {
		return fmt.Errorf("data: URL: %w", err)
	}
	p.setBytes([]byte(raw), mime)
	return nil
}

// setBase64 records base64 data sent inline.
func (p *Part) setBase64(data, mime string) error {
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return fmt.Errorf("invalid base64 data: %w", err)
	}
	p.setBytes(raw, mime)
	return nil
}

func (p *Part) setBytes(raw []byte, mime string) {
	sum := sha256.Sum256(raw)
	p.MIMEType, p.DataLen, p.DataSHA256 = mime, len(raw), hex.EncodeToString(sum[:])
}
