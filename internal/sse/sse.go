// Package sse is Server-Sent Events, both sides: writing an event stream
// (WriteEvent, WriteComment) and reading one as a browser does (Reader),
// each as the WHATWG HTML standard's "Server-sent events" section says
// (https://html.spec.whatwg.org/multipage/server-sent-events.html). The
// gateway writes turns' events with it; tests and benchmarks read them
// with Reader, whose parsing follows the standard's "Interpreting an event
// stream" step by step rather than the writer's format, so that what the
// gateway sends is checked as a browser would read it.
//
// It imports only the standard library, so that the gateway, the tests and
// the benchmarks share one reading of the standard.
package sse

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// ContentType is an event stream's media type.
const ContentType = "text/event-stream"

// WriteEvent writes one event: its id (none when empty), its type (the
// default, "message", when empty) and its data, one data line per line of
// data, then the blank line that dispatches it. An id or type that holds
// a line break (or an id a NULL) could not be read back as written: it is
// an error, and nothing is written.
func WriteEvent(w io.Writer, id, typ string, data []byte) error {
	if strings.ContainsAny(id, "\r\n\x00") {
		return fmt.Errorf("sse: event id %q holds a line break or NULL", id)
	}
	if strings.ContainsAny(typ, "\r\n") {
		return fmt.Errorf("sse: event type %q holds a line break", typ)
	}
	var b bytes.Buffer
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	if typ != "" {
		b.WriteString("event: " + typ + "\n")
	}
	for _, line := range splitLines(data) {
		b.WriteString("data: ")
		b.Write(line)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}

// WriteComment writes a comment line, which readers ignore: a keep-alive
// that proxies and clients see as traffic. Line breaks in text become
// spaces.
func WriteComment(w io.Writer, text string) error {
	_, err := io.WriteString(w, ": "+strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(text)+"\n\n")
	return err
}

// WriteRetry sets the client's reconnection time to d (whole
// milliseconds): an EventSource whose stream then ends waits that long
// and reconnects, sending the last event id it got as Last-Event-ID.
func WriteRetry(w io.Writer, d time.Duration) error {
	_, err := io.WriteString(w, "retry: "+strconv.FormatInt(d.Milliseconds(), 10)+"\n\n")
	return err
}

// splitLines splits data at CRLF, LF and CR, as a reader splits lines.
func splitLines(data []byte) [][]byte {
	var lines [][]byte
	for {
		i := bytes.IndexAny(data, "\r\n")
		if i < 0 {
			return append(lines, data)
		}
		lines = append(lines, data[:i])
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
}

// Event is a dispatched event.
type Event struct {
	// ID is the stream's last event id when the event was dispatched:
	// the event's own, or the last one before it.
	ID string
	// Type is the event's type; "message" when it named none.
	Type string
	// Data is the event's data, its lines joined with "\n".
	Data string
}

// Reader reads an event stream as the standard's "Interpreting an event
// stream" does.
type Reader struct {
	r *bufio.Reader
	// Retry is the reconnection time (ms) the stream set last, 0 if none.
	Retry int
	// lastID is the last event ID buffer.
	lastID string
	// afterCR: the last line ended with CR, so an LF next ends nothing.
	afterCR  bool
	started  bool
	data     strings.Builder
	hasData  bool
	typ      string
	maxBytes int
	lineLen  int
}

// DefaultMaxLine bounds a line a Reader reads, so that a stream without
// line breaks cannot take a reader's memory.
const DefaultMaxLine = 16 << 20

// ErrLineTooLong is returned for a line longer than the Reader's bound.
var ErrLineTooLong = errors.New("sse: line too long")

// NewReader returns a Reader of r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReader(r), maxBytes: DefaultMaxLine}
}

// LastEventID is the last event ID buffer: what a reconnecting client
// sends as Last-Event-ID.
func (rd *Reader) LastEventID() string { return rd.lastID }

// Next returns the next event. At the end of the stream it returns
// io.EOF; an event the stream did not finish with a blank line is
// discarded, as the standard says.
func (rd *Reader) Next() (Event, error) {
	for {
		line, err := rd.line()
		if err != nil {
			return Event{}, err
		}
		if line == "" {
			if ev, ok := rd.dispatch(); ok {
				return ev, nil
			}
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		rd.field(field, value)
	}
}

// field processes a field, as the standard's steps do.
func (rd *Reader) field(name, value string) {
	switch name {
	case "event":
		rd.typ = value
	case "data":
		rd.data.WriteString(value)
		rd.data.WriteByte('\n')
		rd.hasData = true
	case "id":
		if !strings.ContainsRune(value, 0) {
			rd.lastID = value
		}
	case "retry":
		if value != "" && strings.Trim(value, "0123456789") == "" {
			if n, err := strconv.Atoi(value); err == nil {
				rd.Retry = n
			}
		}
	}
}

// dispatch dispatches the event the buffers hold, if they hold data.
func (rd *Reader) dispatch() (Event, bool) {
	defer func() {
		rd.data.Reset()
		rd.hasData = false
		rd.typ = ""
	}()
	if !rd.hasData {
		return Event{}, false
	}
	data := strings.TrimSuffix(rd.data.String(), "\n")
	typ := cmp.Or(rd.typ, "message")
	return Event{ID: rd.lastID, Type: typ, Data: data}, true
}

// line reads the next line, without its end (CRLF, LF or CR). The stream
// is UTF-8; a leading byte order mark is dropped.
func (rd *Reader) line() (string, error) {
	var b strings.Builder
	rd.lineLen = 0
	for {
		c, err := rd.r.ReadByte()
		if err != nil {
			return "", err
		}
		if rd.afterCR {
			rd.afterCR = false
			if c == '\n' {
				continue
			}
		}
		switch c {
		case '\n':
			return rd.text(b.String()), nil
		case '\r':
			rd.afterCR = true
			return rd.text(b.String()), nil
		}
		if rd.lineLen++; rd.lineLen > rd.maxBytes {
			return "", ErrLineTooLong
		}
		b.WriteByte(c)
	}
}

// text drops the stream's byte order mark, at its start only, and makes
// the line valid UTF-8 as a decoder would.
func (rd *Reader) text(s string) string {
	if !rd.started {
		rd.started = true
		s = strings.TrimPrefix(s, "\uFEFF")
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
