package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Hash is the identity of the request a job id names: the SHA-256 (hex)
// of a canonical JSON encoding of the normalised request without the
// fields that do not change what is asked. Two requests with one job id
// and different hashes are different requests, and the second is a
// Conflict wherever it arrives (the gateway's start, the turn's store).
//
// Left out: job_id (the key the hash is stored under), version (it names
// the encoding: a client that upgrades between a request and its retry
// still asks the same), stream and stream_window_sec (how the answer is
// delivered, not what it is), and retry_count and created_at (the
// caller's account of its attempts at the job: a retry counts one more
// and may stamp its own time, and is the same request), and channel (the
// door it came through: a job retried through another door is the same
// request). Everything else counts, including any field added to the
// request later: the encoding is the request's own JSON, so a new field
// is covered the day it is added (and, when it is omitted while empty, a
// request that does not use it keeps its hash).
//
// The encoding is canonical: object keys sorted, numbers as written, and
// an object member whose value is an empty object left out (an omitzero
// struct whose maps are empty but not nil encodes as {} and decodes to
// nothing), so the hash survives any JSON round trip (a workflow's input,
// a CLI's --input).
func (r TurnRequest) Hash() string {
	r.Normalize()
	r.JobID, r.Version, r.Stream, r.StreamWindowSec, r.RetryCount, r.CreatedAt, r.Channel = "", "", nil, 0, 0, "", ""
	b, err := json.Marshal(r)
	if err != nil {
		// Unreachable: the request holds strings, integers, and maps and
		// slices of them. Hash its Go syntax rather than fail.
		b = fmt.Appendf(nil, "%#v", r)
	}
	sum := sha256.Sum256(canonicalJSON(b))
	return hex.EncodeToString(sum[:])
}

// canonicalJSON re-encodes a JSON document with sorted keys, numbers as
// written, and object members whose values are empty objects left out. A
// document that does not decode is returned as it is.
func canonicalJSON(b []byte) []byte {
	v, err := UnmarshalNumbers(b)
	if err != nil {
		return b
	}
	out, err := json.Marshal(pruneEmpty(v))
	if err != nil {
		return b
	}
	return out
}

// pruneEmpty drops the members of objects whose values are empty objects
// once pruned in turn. Array elements stay where they are: their
// positions count.
func pruneEmpty(v any) any {
	switch v := v.(type) {
	case map[string]any:
		// Deleting while ranging visits each key once whatever the order:
		// the result does not depend on it.
		for k, e := range v {
			e = pruneEmpty(e)
			if m, ok := e.(map[string]any); ok && len(m) == 0 {
				delete(v, k)
				continue
			}
			v[k] = e
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = pruneEmpty(e)
		}
		return v
	}
	return v
}
