package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// binaryScript downloads a file with execute_pipeline, keeping it as a
// file, then sends the file it got to another endpoint by body_ref, and
// answers with what the other side says it received. FILES stands for
// the file server's URL.
const binaryScript = `
rules:
  - name: download
    when: {user: '(?i)^download (?P<name>[a-z]+\.bin) and send it on'}
    reply:
      tool_calls:
        - name: execute_pipeline
          arguments: '{"session_id": "s", "pipeline": [{"step": "http_request", "url": "FILES/files/${name}", "response_as": "file"}]}'
  - name: send
    when: {tool: '(?s)\nfile: (?P<ref>cas://sha256:[0-9a-f]{64}) '}
    reply:
      tool_calls:
        - name: execute_pipeline
          arguments: '{"session_id": "s", "pipeline": [{"step": "http_request", "url": "FILES/upload", "method": "POST", "body_ref": "${ref}", "params": {"from": "agentflow"}}]}'
  - name: sent
    when: {tool: '"bytes":(?P<n>[0-9]+),"sha256":"(?P<sum>[0-9a-f]{64})"'}
    reply: {text: 'Sent ${n} bytes; the other side has sha256 ${sum}.'}
  - name: tool-error
    when: {tool: '(?s)^error: (.+)$'}
    reply: {text: 'The tool said: $1'}
  - name: fallback
    reply: {text: "I don't know."}
`

// binaryCatalog gives the agent execute_pipeline, uncached and without
// approval (its sending step is a POST), and the file server in its
// egress allowlist. FILESHOST stands for the server's host:port.
const binaryCatalog = `
tenant: demo
default_agent: courier
egress: ["FILESHOST"]
tools:
  - name: execute_pipeline
    kind: execute_pipeline
    approval: never
    config: {cache_ttl_sec: 0}
agents:
  - id: courier
    model: openai:gpt-4o-mini
    tools: [execute_pipeline]
    limits: {max_iterations: 4, turn_timeout_sec: 300}
`

// fileServer serves generated files of the size their request names —
// bytes that do not compress, made as they are sent, never held — and
// takes uploads, answering their length and sha256 as it reads them.
// The first request for a file named flaky*.bin is cut off after a
// third of its bytes.
type fileServer struct {
	*httptest.Server
	downloads atomic.Int32
	cut       atomic.Bool
	mu        sync.Mutex
	uploads   []upload
}

// upload is what the file server received.
type upload struct {
	contentType, query string
	length, bytes      int64
	sum                string
}

// fileSize is the size of the generated files: 50 MiB.
const fileSize = 50 << 20

// generated writes the n bytes of the generated file seeded by name.
func generated(w io.Writer, name string, n int64) error {
	var seed [32]byte
	copy(seed[:], name)
	_, err := io.CopyN(w, rand.NewChaCha8(seed), n)
	return err
}

// received is what the server's uploads received.
func (fs *fileServer) received() []upload {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return append([]upload(nil), fs.uploads...)
}

func startFileServer(t *testing.T) *fileServer {
	t.Helper()
	fs := &fileServer{}
	fs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/files/"):
			fs.downloads.Add(1)
			name := strings.TrimPrefix(r.URL.Path, "/files/")
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
			w.Header().Set("Content-Length", strconv.Itoa(fileSize))
			if strings.HasPrefix(name, "flaky") && fs.cut.CompareAndSwap(false, true) {
				_ = generated(w, name, fileSize/3)
				panic(http.ErrAbortHandler) // the connection drops midway
			}
			_ = generated(w, name, fileSize)
		case r.URL.Path == "/upload" && r.Method == http.MethodPost:
			h := sha256.New()
			n, err := io.Copy(h, r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			fs.mu.Lock()
			fs.uploads = append(fs.uploads, upload{contentType: r.Header.Get("Content-Type"), query: r.URL.RawQuery,
				length: r.ContentLength, bytes: n, sum: hex.EncodeToString(h.Sum(nil))})
			fs.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"bytes":%d,"sha256":"%s"}`, n, hex.EncodeToString(h.Sum(nil)))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(fs.Close)
	return fs
}

// memory is what a piece of work cost the process's Go heap.
type memory struct {
	// allocated is the bytes allocated in all (runtime/metrics
	// /gc/heap/allocs:bytes).
	allocated uint64
	// peakGrowth is the peak of the heap in use
	// (/memory/classes/heap/objects:bytes: objects live or not yet
	// swept), sampled every millisecond, over where it stood after a
	// collection before the work.
	peakGrowth uint64
}

// measure runs work with the collector set to run at 10% of heap growth
// (GOGC=10), so that the heap in use follows what is live rather than
// the collector's headroom, which at the default of 100% is as large as
// the live heap itself whatever the work holds.
func measure(work func()) memory {
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	samples := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	runtime.GC()
	metrics.Read(samples)
	allocs0, inUse0 := samples[0].Value.Uint64(), samples[1].Value.Uint64()
	var peak atomic.Uint64
	peak.Store(inUse0)
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				metrics.Read(s)
				if v := s[0].Value.Uint64(); v > peak.Load() {
					peak.Store(v)
				}
			}
		}
	}()
	work()
	close(done)
	<-sampled
	metrics.Read(samples)
	return memory{allocated: samples[0].Value.Uint64() - allocs0, peakGrowth: peak.Load() - inUse0}
}

// maxHeapGrowth bounds the growth of the heap in use while a turn moves
// a 50 MiB file in and out: a few chunks' buffers (the download's, COPY's,
// the reader's, the driver's), with what the turn's own work holds.
// Measured at 8 to 12 MiB on these machines under -race; a version that
// read the download into memory grew by 165 MiB.
const maxHeapGrowth = 16 << 20

// TestBinaryData is a tool writing a 50 MiB file and another reading it,
// on the real stack, through a real turn: execute_pipeline downloads the
// file from a local server, keeping it as a file of the tenant's (stored
// as it arrives, its sha256 computed on the way), and its next call sends
// that file, read as a stream from the store, to another endpoint, which
// receives every byte. The worker's heap in use grows by far less than
// the file while it does: the worker runs in this process, so its Go
// heap is what can be measured of it honestly here (measure); the bytes
// allocated in all are logged beside it. Then a download cut off midway
// fails the call without storing anything, and Temporal's retry of the
// call downloads and stores the file.
func TestBinaryData(t *testing.T) {
	files := startFileServer(t)
	host := strings.TrimPrefix(files.URL, "http://")
	srv := testserver.Start(t, testserver.Options{
		Script:   strings.ReplaceAll(binaryScript, "FILES", files.URL),
		Catalogs: []string{strings.ReplaceAll(binaryCatalog, "FILESHOST", host)},
	})
	run := func(prompt string) agent.TurnResult {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		turn, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo",
			JobID: "binary-" + testserver.RandomID(), Prompt: prompt})
		require.NoError(t, err)
		res, err := turnclient.Result(ctx, turn)
		require.NoError(t, err)
		return res
	}
	want := func(name string) string {
		h := sha256.New()
		require.NoError(t, generated(h, name, fileSize))
		return hex.EncodeToString(h.Sum(nil))
	}
	ctx := t.Context()

	sum := want("archive.bin")
	var res agent.TurnResult
	used := measure(func() { res = run("download archive.bin and send it on") })
	t.Logf("a turn moving a %d MiB file in and out: heap in use grew by %.1f MiB at its peak; %.1f MiB allocated in all",
		fileSize>>20, float64(used.peakGrowth)/(1<<20), float64(used.allocated)/(1<<20))
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, fmt.Sprintf("Sent %d bytes; the other side has sha256 %s.", fileSize, sum), res.Output)
	require.Equal(t, []upload{{contentType: "application/octet-stream", query: "from=agentflow", length: fileSize, bytes: fileSize, sum: sum}}, files.received())
	require.Less(t, used.peakGrowth, uint64(maxHeapGrowth), "the heap grew by far less than the file")

	// The file is the tenant's, by the ref of its bytes, and goes with
	// the answer as a file block of the call that fetched it.
	ref := agent.CASRefPrefix + sum
	info, err := srv.Store().TenantBlobInfo(ctx, "demo", ref)
	require.NoError(t, err)
	require.Equal(t, agent.BlobInfo{Ref: ref, ContentType: "application/octet-stream", Size: fileSize}, info)
	require.Len(t, res.Metadata.ToolCalls, 2)
	var blocks []agent.Block
	for _, b := range res.Blocks {
		if b.Type == agent.PartFile {
			blocks = append(blocks, b)
		}
	}
	require.Equal(t, []agent.Block{{Type: agent.PartFile, Ref: ref, MIMEType: "application/octet-stream", Name: "archive.bin",
		CallID: blocks[0].CallID}}, blocks)
	_, err = srv.Store().TenantBlobInfo(ctx, "other", ref)
	require.True(t, agent.IsCode(err, agent.CodeNotFound), "another tenant cannot read it: %v", err)

	// A download cut off midway fails its call, which Temporal runs
	// again; the failed attempt left nothing, the retry stored the file.
	chunks := func() (n int) {
		require.NoError(t, srv.Store().Pool().QueryRow(ctx, `SELECT count(*) FROM blob_chunks`).Scan(&n))
		return n
	}
	before, downloads := chunks(), files.downloads.Load()
	flaky := want("flaky.bin")
	res = run("download flaky.bin and send it on")
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, fmt.Sprintf("Sent %d bytes; the other side has sha256 %s.", fileSize, flaky), res.Output)
	require.True(t, files.cut.Load())
	require.EqualValues(t, 2, files.downloads.Load()-downloads, "the call was run again")
	require.Equal(t, before+fileSize>>20, chunks(), "only the retry's chunks are kept: a MiB each")
	info, err = srv.Store().TenantBlobInfo(ctx, "demo", agent.CASRefPrefix+flaky)
	require.NoError(t, err)
	require.EqualValues(t, fileSize, info.Size)
}
