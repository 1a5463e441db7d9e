package intake

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// counted is a source that counts what is read of it.
type counted struct {
	r     io.Reader
	reads int
}

func (c *counted) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p)
}

func TestBody(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		length    int64 // -1: not declared
		max       int64
		src       func(string) io.Reader // default: the body
		deadline  time.Duration          // from now; 0: none
		status    int                    // 0: read whole
		code      agent.Code
		detail    string
		readsNone bool // refused before any byte is read
	}{
		{name: "declared", body: "hello", length: 5, max: 10},
		{name: "declared, exactly max", body: "0123456789", length: 10, max: 10},
		{name: "chunked", body: "hello", length: -1, max: 10},
		{name: "chunked, exactly max", body: "0123456789", length: -1, max: 10},
		{name: "empty, chunked", body: "", length: -1, max: 10},
		{name: "declared too large", body: "0123456789x", length: 11, max: 10, status: 413, code: agent.CodeInvalid, detail: "larger than 10 bytes", readsNone: true},
		{name: "chunked too large", body: "0123456789x", length: -1, max: 10, status: 413, code: agent.CodeInvalid, detail: "larger than 10 bytes"},
		{name: "declared larger than the client's budget", body: strings.Repeat("x", 101), length: 101, max: 1000, status: 429, code: agent.CodeRateLimited,
			detail: EnvClientBytes, readsNone: true},
		{name: "chunked larger than the client's budget", body: strings.Repeat("x", 101), length: -1, max: 1000, status: 429, code: agent.CodeRateLimited,
			detail: EnvClientBytes},
		{name: "stalled past its deadline", body: "hel", length: 5, max: 10, deadline: -time.Second,
			src: func(s string) io.Reader {
				return io.MultiReader(strings.NewReader(s), iotest.ErrReader(os.ErrDeadlineExceeded))
			},
			status: 408, code: agent.CodeTimeout, detail: EnvTimeout},
		{name: "cut short before its deadline", body: "hel", length: 5, max: 10, deadline: time.Minute,
			src: func(s string) io.Reader {
				return io.MultiReader(strings.NewReader(s), iotest.ErrReader(io.ErrUnexpectedEOF))
			},
			status: 400, code: agent.CodeInvalid, detail: "could not be read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			budget := NewBudget(100, 150)
			var src io.Reader = strings.NewReader(tt.body)
			if tt.src != nil {
				src = tt.src(tt.body)
			}
			c := &counted{r: src}
			b := &Body{Src: c, Budget: budget, Client: "demo/ana", Max: tt.max, Length: tt.length}
			if tt.deadline != 0 {
				b.Deadline = time.Now().Add(tt.deadline)
			}
			got, err := io.ReadAll(iotest.OneByteReader(b))
			if tt.status == 0 {
				require.NoError(t, err)
				require.Equal(t, tt.body, string(got))
			} else {
				var e *Error
				require.ErrorAs(t, err, &e)
				require.Equal(t, tt.status, e.Status)
				require.True(t, agent.IsCode(err, tt.code), "%v", err)
				require.Contains(t, err.Error(), tt.detail)
				require.LessOrEqual(t, int64(len(got)), tt.max)
				_, again := b.Read(make([]byte, 1))
				require.Equal(t, err, again, "a failed body stays failed")
			}
			if tt.readsNone {
				require.Zero(t, c.reads, "nothing is read of a body refused by its declared length")
			}
			require.NoError(t, b.Close())
			mine, total := budget.InFlight("demo/ana")
			require.Zero(t, mine)
			require.Zero(t, total)
		})
	}
}

// TestBudget: a declared length is held from the first read to the end,
// per client and in total; a closed body gives its bytes back.
func TestBudget(t *testing.T) {
	budget := NewBudget(100, 150)
	read1 := func(client string, length int64) (*Body, error) {
		b := &Body{Src: strings.NewReader(strings.Repeat("x", int(length))), Budget: budget, Client: client, Max: 1000, Length: length}
		_, err := b.Read(make([]byte, 1))
		return b, err
	}
	a1, err := read1("a", 60)
	require.NoError(t, err)
	mine, total := budget.InFlight("a")
	require.Equal(t, []int64{60, 60}, []int64{mine, total}, "the declared length is held from the first read")

	_, err = read1("a", 50)
	require.ErrorContains(t, err, EnvClientBytes, "a's second body would pass its bound")
	b1, err := read1("b", 80)
	require.NoError(t, err, "b has a bound of its own")
	_, err = read1("c", 20)
	require.ErrorContains(t, err, EnvTotalBytes, "60 + 80 + 20 passes the total")
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, http.StatusTooManyRequests, e.Status)

	require.NoError(t, a1.Close())
	require.NoError(t, a1.Close(), "closing again gives nothing back twice")
	_, total = budget.InFlight("a")
	require.Equal(t, int64(80), total)
	c1, err := read1("c", 20)
	require.NoError(t, err, "a's bytes are back")
	got, err := io.ReadAll(c1)
	require.NoError(t, err)
	require.Len(t, got, 19)
	require.NoError(t, b1.Close())
	_, total = budget.InFlight("")
	require.Zero(t, total)
}

func TestRefused(t *testing.T) {
	cause := agent.Errorf(agent.CodeUnauthenticated, "missing bearer token")
	body := Refused(http.StatusUnauthorized, cause)
	n, err := body.Read(make([]byte, 10))
	require.Zero(t, n)
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, http.StatusUnauthorized, e.Status)
	require.ErrorIs(t, err, cause)
	require.NoError(t, body.Close())
}

// FuzzBody: whatever the body, its declared length, its bound and how it
// is read, a Body yields the body when it is within its bound and an
// error when not, never more than its bound, and holds nothing once done.
func FuzzBody(f *testing.F) {
	f.Add([]byte("hello"), uint16(10), true, uint8(1), false)
	f.Add([]byte("hello"), uint16(4), false, uint8(3), false)
	f.Add([]byte(""), uint16(0), true, uint8(0), true)
	f.Add(bytes.Repeat([]byte("x"), 300), uint16(299), false, uint8(255), true)
	f.Add(bytes.Repeat([]byte("x"), 1000), uint16(2000), false, uint8(7), true)
	f.Fuzz(func(t *testing.T, body []byte, max uint16, declared bool, chunk uint8, whole bool) {
		budget := NewBudget(1<<16, 1<<17)
		length := int64(-1)
		if declared {
			length = int64(len(body))
		}
		b := &Body{Src: iotest.HalfReader(bytes.NewReader(body)), Budget: budget, Client: "c", Max: int64(max), Length: length}
		var got []byte
		buf := make([]byte, int(chunk)+1)
		var err error
		if whole {
			got, err = b.ReadAll()
			if err == nil {
				err = io.EOF
			}
			require.LessOrEqual(t, int64(len(got)), int64(max))
			if length >= 0 && err == io.EOF {
				require.Equal(t, len(got)+1, cap(got), "a declared length is read into a buffer of its size")
			}
		}
		for !whole {
			var n int
			n, err = b.Read(buf)
			got = append(got, buf[:n]...)
			require.LessOrEqual(t, int64(len(got)), int64(max))
			mine, total := budget.InFlight("c")
			require.LessOrEqual(t, mine, int64(max)+1)
			require.Equal(t, mine, total)
			if err != nil {
				break
			}
		}
		if len(body) <= int(max) {
			require.ErrorIs(t, err, io.EOF)
			require.Equal(t, string(body), string(got))
		} else {
			var e *Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, http.StatusRequestEntityTooLarge, e.Status)
		}
		require.NoError(t, b.Close())
		_, total := budget.InFlight("c")
		require.Zero(t, total)
	})
}
