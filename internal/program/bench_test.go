package program

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// sequential20 makes 20 calls, each waiting for the one before.
const sequential20 = `let sum = 0;
for (let i = 0; i < 20; i++) {
  sum += await tools.add({a: i, b: sum});
}
return sum;`

// BenchmarkSequential drives a program of 20 sequential calls to Done by
// re-execution on one warm child: 21 Runs, the program re-run from its
// start each time (0, 1, … 20 recorded calls). One op is the whole
// program: the interpreter's work and 21 round trips to the child.
func BenchmarkSequential(b *testing.B) {
	r := New(Options{Concurrency: 1})
	b.Cleanup(func() { r.Close() })
	in := Input{Source: sequential20, Tools: tools, Now: time.Unix(0, 0)}
	for b.Loop() {
		out, _, err := drive(b, r, in, add)
		if err != nil || !out.Done {
			b.Fatal(err, out)
		}
	}
}

// BenchmarkSequentialInterpreter is the same program's runs in process,
// without the child: the interpreter's share of the above, at 20 calls
// and at 100, where re-execution's O(n²) shows.
func BenchmarkSequentialInterpreter(b *testing.B) {
	for _, n := range []int{20, 100} {
		b.Run(fmt.Sprintf("calls=%d", n), func(b *testing.B) {
			src := strings.Replace(sequential20, "i < 20", fmt.Sprintf("i < %d", n), 1)
			in := Input{Source: src, Tools: tools, Now: time.Unix(0, 0), Limits: Limits{}.resolve()}
			cache := compiled{}
			for b.Loop() {
				in.Recorded = in.Recorded[:0]
				for {
					out, err := execute(in, cache)
					if err != nil {
						b.Fatal(err)
					}
					if out.Done {
						break
					}
					for _, c := range out.Pending {
						res, _ := add(c)
						in.Recorded = append(in.Recorded, Recorded{N: c.N, Tool: c.Tool, Args: c.Args, Result: json.RawMessage(res)})
					}
				}
			}
		})
	}
}
