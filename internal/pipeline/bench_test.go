package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// peakHeap samples the heap while a benchmark runs and reports, in MB,
// the heap before the loop (the input), its peak during the loop, and the
// bytes allocated per op.
type peakHeap struct {
	stop chan struct{}
	done sync.WaitGroup
	base uint64
	peak uint64
	m0   runtime.MemStats
}

func startPeakHeap() *peakHeap {
	p := &peakHeap{stop: make(chan struct{})}
	runtime.GC()
	runtime.ReadMemStats(&p.m0)
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	p.base = sample[0].Value.Uint64()
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			p.peak = max(p.peak, sample[0].Value.Uint64())
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

func (p *peakHeap) report(b *testing.B) {
	close(p.stop)
	p.done.Wait()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(p.base)/1e6, "base-heap-MB")
	b.ReportMetric(float64(p.peak)/1e6, "peak-heap-MB")
	b.ReportMetric(float64(m1.TotalAlloc-p.m0.TotalAlloc)/1e6/float64(b.N), "alloc-MB/op")
}

func salesTable(n int) Value {
	rows := make([]map[string]any, n)
	for i := range rows {
		rows[i] = map[string]any{
			"id":       json.Number(fmt.Sprint(i)),
			"category": fmt.Sprintf("cat-%02d", i%50),
			"city":     []string{"NYC", "LAX", "SFO", "BOS", "SEA"}[i%5],
			"price":    json.Number(fmt.Sprintf("%d.%02d", (i*7919)%1000, i%100)),
			"day":      fmt.Sprintf("2024-%02d-%02d", i%12+1, i%28+1),
		}
	}
	return TableOf(rows)
}

// BenchmarkSortFilterGroupBy100k: filter, sort and aggregate 100,000 rows.
func BenchmarkSortFilterGroupBy100k(b *testing.B) {
	in := salesTable(100_000)
	p, err := Decode([]byte(callOn(`[
		{"step": "table_filter", "condition": {"field": "price", "op": "<", "value": 500}},
		{"step": "table_sort", "field": "price", "order": "desc"},
		{"step": "groupby", "by": ["category", "city"], "agg": "avg", "field": "price"}]`)))
	require.NoError(b, err)
	env := Env{Load: func(context.Context, string) (Value, error) { return in, nil }}
	peak := startPeakHeap()
	b.ResetTimer()
	for b.Loop() {
		res, err := Run(context.Background(), p, env)
		if err != nil || res.Rows != 50 {
			b.Fatalf("rows %d, err %v", res.Rows, err)
		}
	}
	b.StopTimer()
	peak.report(b)
}

// BenchmarkJQ10MB: a select-and-reshape query over a 10 MB document.
func BenchmarkJQ10MB(b *testing.B) {
	type item struct {
		ID     int      `json:"id"`
		Name   string   `json:"name"`
		Price  float64  `json:"price"`
		Tags   []string `json:"tags"`
		Seller struct {
			Name   string  `json:"name"`
			Rating float64 `json:"rating"`
		} `json:"seller"`
	}
	var items []item
	size := 0
	for i := 0; size < 10<<20; i++ {
		it := item{ID: i, Name: fmt.Sprintf("item number %d with a longer name", i), Price: float64(i%500) + 0.99, Tags: []string{"a", "b", fmt.Sprint(i % 7)}}
		it.Seller.Name = fmt.Sprintf("seller-%d", i%300)
		it.Seller.Rating = float64(i%50) / 10
		items = append(items, it)
		size += 144
	}
	raw, err := json.Marshal(map[string]any{"count": len(items), "items": items})
	require.NoError(b, err)
	in, err := Parse(raw, "application/json", "")
	require.NoError(b, err)
	p, err := Decode([]byte(callOn(`[{"step": "jq_transform", "query": "[.items[] | select(.price < 100 and .seller.rating >= 2) | {id, name, price, seller: .seller.name}]"}]`)))
	require.NoError(b, err)
	env := Env{Load: func(context.Context, string) (Value, error) { return in, nil }}
	b.SetBytes(int64(len(raw)))
	peak := startPeakHeap()
	b.ResetTimer()
	for b.Loop() {
		res, err := Run(context.Background(), p, env)
		if err != nil || res.Rows == 0 {
			b.Fatalf("rows %d, err %v", res.Rows, err)
		}
	}
	b.StopTimer()
	peak.report(b)
	b.ReportMetric(float64(len(raw))/1e6, "input-MB")
}

// BenchmarkJQSmall: one small jq_transform, as a model writes them, over a
// small document: what the step costs beyond gojq's own work.
func BenchmarkJQSmall(b *testing.B) {
	in, err := Parse([]byte(`{"count": 3, "items": [{"id": 1, "price": 50}, {"id": 2, "price": 150}, {"id": 3, "price": 80}]}`), "application/json", "")
	require.NoError(b, err)
	p, err := Decode([]byte(callOn(`[{"step": "jq_transform", "query": "[.items[] | select(.price < 100) | {id, price}]"}]`)))
	require.NoError(b, err)
	env := Env{Load: func(context.Context, string) (Value, error) { return in, nil }}
	for b.Loop() {
		res, err := Run(context.Background(), p, env)
		if err != nil || res.Rows != 2 {
			b.Fatalf("rows %d, err %v", res.Rows, err)
		}
	}
}
