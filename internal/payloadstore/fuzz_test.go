package payloadstore_test

import (
	"strings"
	"testing"

	"github.com/agentflow/agentflow/internal/payloadstore"
)

// FuzzParseReference feeds the reference decoder what a history may hold
// (anyone who can start a workflow writes one): it never panics, and a
// reference it accepts names a content-addressed object of a possible
// size.
func FuzzParseReference(f *testing.F) {
	sum := strings.Repeat("0123456789abcdef", 4)
	f.Add(`{"driverName":"agentflow-s3","claimData":{"key":"payloads/sha256/` + sum + `","sha256":"` + sum + `","size":"42","uri":"s3://b/k"}}`)
	f.Add(`{"driverName":"agentflow-s3","claimData":{"key":"payloads/sha256/` + sum + `","sha256":"` + sum + `","size":"-1"}}`)
	f.Add(`{"driverName":"agentflow-s3","claimData":{"key":"../` + sum + `","sha256":"` + sum + `","size":"1"}}`)
	f.Add(`{"driverName":"other","claimData":{}}`)
	f.Add(`{"driver_name":"agentflow-s3","claim_data":{"size":"99999999999999999999"}}`)
	f.Add(`not json`)
	f.Add(``)
	f.Fuzz(func(t *testing.T, data string) {
		c, ok, err := payloadstore.ParseReference(reference(data))
		if !ok {
			t.Fatal("a payload of the reference's encoding and type is a reference")
		}
		if err != nil {
			return
		}
		if c.Key != payloadstore.Key(c.SHA256) || len(c.SHA256) != 64 || c.Size < 1 {
			t.Fatalf("accepted %+v", c)
		}
	})
}
