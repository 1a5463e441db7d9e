// Package flights serves a small flight-search API over HTTP: the data the
// demo's and the tests' data agent fetches, sorts and filters with
// execute_pipeline (the scenario of seed 004 §10). Its answers depend only
// on the request, so tests can assert on them.
//
// It imports nothing of agentflow's: it stands for a third party's API.
//
//	GET /search?origin=NYC&dest=LAX          a JSON array of flights
//	GET /search.csv?origin=NYC&dest=LAX      the same flights as CSV
//
// A flight is {"id", "airline", "flight", "origin", "dest", "departs",
// "price", "stops"}; departs is "2006-01-02 15:04" in the origin's time.
package flights

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Flight is one flight of a search.
type Flight struct {
	ID      string `json:"id"`
	Airline string `json:"airline"`
	Flight  string `json:"flight"`
	Origin  string `json:"origin"`
	Dest    string `json:"dest"`
	Departs string `json:"departs"`
	Price   int    `json:"price"`
	Stops   int    `json:"stops"`
}

// PerRoute is how many flights a search returns.
const PerRoute = 50

var airlines = []struct{ name, code string }{
	{"Delta", "DL"}, {"United", "UA"}, {"American", "AA"}, {"JetBlue", "B6"}, {"Alaska", "AS"}, {"Southwest", "WN"},
}

// Search returns the flights from origin to dest: the same ones for the
// same route, every time.
func Search(origin, dest string) []Flight {
	h := fnv.New64a()
	h.Write([]byte(origin + "→" + dest))
	rng := rand.New(rand.NewPCG(h.Sum64(), 2026))
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	out := make([]Flight, PerRoute)
	for i := range out {
		a := airlines[rng.IntN(len(airlines))]
		out[i] = Flight{
			ID:      fmt.Sprintf("%s-%s-%02d", origin, dest, i+1),
			Airline: a.name,
			Flight:  fmt.Sprintf("%s%d", a.code, 100+rng.IntN(900)),
			Origin:  origin,
			Dest:    dest,
			Departs: day.Add(time.Duration(5*60+rng.IntN(17*60)) * time.Minute).Format("2006-01-02 15:04"),
			Price:   149 + rng.IntN(700),
			Stops:   rng.IntN(3),
		}
	}
	return out
}

// Handler serves the API.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /search", func(w http.ResponseWriter, r *http.Request) {
		fs, ok := search(w, r)
		if !ok {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(fs)
	})
	mux.HandleFunc("GET /search.csv", func(w http.ResponseWriter, r *http.Request) {
		fs, ok := search(w, r)
		if !ok {
			return
		}
		w.Header().Set("Content-Type", "text/csv")
		cw := csv.NewWriter(w)
		_ = cw.Write([]string{"id", "airline", "flight", "origin", "dest", "departs", "price", "stops"})
		for _, f := range fs {
			_ = cw.Write([]string{f.ID, f.Airline, f.Flight, f.Origin, f.Dest, f.Departs, strconv.Itoa(f.Price), strconv.Itoa(f.Stops)})
		}
		cw.Flush()
	})
	return mux
}

func search(w http.ResponseWriter, r *http.Request) ([]Flight, bool) {
	origin, dest := strings.ToUpper(r.URL.Query().Get("origin")), strings.ToUpper(r.URL.Query().Get("dest"))
	if !airport(origin) || !airport(dest) {
		http.Error(w, `{"error":"origin and dest are required: three-letter airport codes, e.g. origin=NYC&dest=LAX"}`, http.StatusBadRequest)
		return nil, false
	}
	return Search(origin, dest), true
}

func airport(code string) bool {
	return len(code) == 3 && !strings.ContainsFunc(code, func(c rune) bool { return c < 'A' || c > 'Z' })
}

// Server is the API served on a local address.
type Server struct {
	srv *http.Server
	ln  net.Listener
}

// Start serves the API on addr (host:port; port 0 picks a free one).
func Start(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("flights: listen on %s: %w", addr, err)
	}
	s := &Server{srv: &http.Server{Handler: Handler(), ReadHeaderTimeout: 5 * time.Second}, ln: ln}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Addr is the host:port the API is served on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the API's base URL.
func (s *Server) URL() string { return "http://" + s.Addr() }

// Close stops serving.
func (s *Server) Close() error { return s.srv.Close() }
