package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
)

// requestTimes times the server's answers to the client's unary requests
// (long polls for tasks excepted), by method, while it is started.
type requestTimes struct {
	mu     sync.Mutex
	on     bool
	byKind map[string]*requestTime
}

type requestTime struct {
	n     int
	total time.Duration
}

func (r *requestTimes) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	begin := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	kind := method[strings.LastIndex(method, "/")+1:]
	if strings.HasPrefix(kind, "Poll") {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.on {
		t := r.byKind[kind]
		if t == nil {
			t = &requestTime{}
			r.byKind[kind] = t
		}
		t.n++
		t.total += time.Since(begin)
	}
	return err
}

func (r *requestTimes) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on, r.byKind = true, map[string]*requestTime{}
}

// print stops the timing and prints each kind's count per run and mean.
func (r *requestTimes) print(w io.Writer, runs int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = false
	for _, k := range slices.Sorted(maps.Keys(r.byKind)) {
		t := r.byKind[k]
		fmt.Fprintf(w, "  %-36s %5.2f per workflow  %6.2f ms\n", k, float64(t.n)/float64(runs),
			float64(t.total.Microseconds())/1000/float64(t.n))
	}
}
