package objstore_test

import (
	"bytes"
	"crypto/md5"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/objstore"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// TestDeleteMany: keys go a thousand a request, a missing key is no
// error, and a store that answers 501 to multi-object deletes (GCS's XML
// API) gets one delete per object.
func TestDeleteMany(t *testing.T) {
	for _, tt := range []struct {
		name          string
		noMulti       bool
		keys          int
		wantRequests  int64 // deletes sent, counting a refused multi-delete
		wantMultiSent int64
	}{
		{"multi-object delete", false, 1203, 2, 2},
		{"a store without it", true, 12, 1 + 12, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := devtest.ObjectStore(t)
			backend, err := url.Parse(cfg.Endpoint)
			require.NoError(t, err)
			var deletes, multi atomic.Int64
			proxy := httputil.NewSingleHostReverseProxy(backend)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if _, ok := r.URL.Query()["delete"]; ok && r.Method == http.MethodPost {
					deletes.Add(1)
					multi.Add(1)
					if tt.noMulti {
						http.Error(w, "<Error><Code>NotImplemented</Code></Error>", http.StatusNotImplemented)
						return
					}
				} else if r.Method == http.MethodDelete {
					deletes.Add(1)
				}
				proxy.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			cfg.Endpoint = srv.URL
			s, err := objstore.New(t.Context(), cfg)
			require.NoError(t, err)

			var keys []string
			for i := range tt.keys {
				key := "k/" + strconv.Itoa(i)
				if i%100 != 7 { // every hundredth key is missing
					body := []byte(key)
					sum := md5.Sum(body)
					require.NoError(t, s.Put(t.Context(), key, bytes.NewReader(body), int64(len(body)), "text/plain", sum[:]))
				}
				keys = append(keys, key)
			}
			require.NoError(t, s.DeleteMany(t.Context(), keys))
			require.Equal(t, tt.wantRequests, deletes.Load())
			require.Equal(t, tt.wantMultiSent, multi.Load())
			left, err := s.List(t.Context(), "k/")
			require.NoError(t, err)
			require.Empty(t, left)
		})
	}
}
