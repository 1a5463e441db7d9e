package childproc

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// MaxControlFrame bounds frames that carry no work: hello, errors, done.
const MaxControlFrame = 64 << 10

// WriteFrame writes one frame; the caller flushes.
func WriteFrame(w *bufio.Writer, kind byte, payload []byte) error {
	if uint64(len(payload)) > math.MaxUint32 {
		return fmt.Errorf("frame of %d bytes is over the 4 GiB limit", len(payload))
	}
	var h [5]byte
	h[0] = kind
	binary.BigEndian.PutUint32(h[1:], uint32(len(payload)))
	if _, err := w.Write(h[:]); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

// ErrFrameTooLarge is ReadFrame's error for a frame longer than its max.
var ErrFrameTooLarge = errors.New("frame is over the size limit")

// ReadFrame reads one frame of at most max payload bytes. A frame over
// max is not read (its kind is returned with ErrFrameTooLarge): the
// stream is then out of step and must be dropped. The error is io.EOF
// only when the stream ended between frames.
func ReadFrame(r *bufio.Reader, max int) (kind byte, payload []byte, err error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if uint64(n) > uint64(max) {
		return h[0], nil, fmt.Errorf("%w: %c frame of %d bytes, limit %d", ErrFrameTooLarge, h[0], n, max)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, fmt.Errorf("read %c frame: %w", h[0], err)
	}
	return h[0], payload, nil
}
