// Package crm serves a small customer API over HTTP, with the OpenAPI 3
// document that describes it: the API that tests call with
// the openapi_action tool kind. Its answers depend only on the requests
// it was sent, so tests can assert on them.
//
// It imports nothing of agentflow's: it stands for a third party's API.
//
//	GET    /openapi.json, /openapi.yaml             the document (its server is /v2)
//	GET    /v2/customers?q=an&tier=pro&limit=10     searchCustomers
//	GET    /v2/customers/{customerId}?expand=orders getCustomer
//	GET    /v2/customers/{customerId}/orders        listOrders
//	POST   /v2/orders                               createOrder
//	DELETE /v2/orders/{orderId}                     cancelOrder
//
// Customers 1 to 20 exist. createOrder honours an Idempotency-Key header:
// the same key places one order, however often it is sent. Customer 13's record predates the tiers: its
// tier is "legacy", which the document does not allow, so that a client
// can be seen noticing an answer outside the document. The API itself
// checks no credentials; wrap it to do so.
package crm

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

//go:embed openapi.yaml
var documentYAML []byte

// DocumentYAML returns the API's OpenAPI document as YAML.
func DocumentYAML() []byte { return slices.Clone(documentYAML) }

// DocumentJSON returns the API's OpenAPI document as JSON.
func DocumentJSON() []byte {
	var doc any
	if err := yaml.Unmarshal(documentYAML, &doc); err != nil {
		panic(fmt.Sprintf("crm: embedded document: %v", err)) // covered by tests
	}
	data, err := json.Marshal(doc)
	if err != nil {
		panic(fmt.Sprintf("crm: embedded document: %v", err))
	}
	return data
}

// Customer is a customer record.
type Customer struct {
	ID     int     `json:"id"`
	Name   string  `json:"name"`
	Email  string  `json:"email"`
	Tier   string  `json:"tier"`
	Orders []Order `json:"orders,omitempty"`
}

// Order is an order of a customer.
type Order struct {
	ID         string `json:"id"`
	CustomerID int    `json:"customerId"`
	Status     string `json:"status"`
	Items      []Item `json:"items"`
	Note       string `json:"note,omitempty"`
}

// Item is a line of an order.
type Item struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

// Customers is how many customers there are: ids 1 to Customers.
const Customers = 20

var names = []string{"Ada Lovelace", "Alan Turing", "Grace Hopper", "Edsger Dijkstra", "Barbara Liskov",
	"Donald Knuth", "Frances Allen", "Ken Thompson", "Radia Perlman", "John Backus"}

var tiers = []string{"free", "pro", "enterprise"}

// CustomerByID returns customer id as the API answers it, without orders.
func CustomerByID(id int) (Customer, bool) {
	if id < 1 || id > Customers {
		return Customer{}, false
	}
	name := names[(id-1)%len(names)]
	if id > len(names) {
		name += " II"
	}
	c := Customer{ID: id, Name: name, Tier: tiers[id%len(tiers)]}
	c.Email = strings.ToLower(strings.ReplaceAll(name, " ", ".")) + "@example.com"
	if id == 13 {
		c.Tier = "legacy"
	}
	return c, true
}

// API is the customer API. Its orders are kept in memory: each API starts
// with two shipped orders per customer.
type API struct {
	mux *http.ServeMux

	mu     sync.Mutex
	orders []Order           // in the order they were placed
	placed map[string]string // Idempotency-Key → order id
}

// New returns an API with its seed orders.
func New() *API {
	a := &API{mux: http.NewServeMux(), placed: map[string]string{}}
	for id := 1; id <= Customers; id++ {
		for j := range 2 {
			a.orders = append(a.orders, Order{ID: fmt.Sprintf("O-%d", id*100+j), CustomerID: id, Status: "shipped",
				Items: []Item{{SKU: fmt.Sprintf("SKU-%d", (id+j)%7+1), Qty: j + 1}}})
		}
	}
	a.mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(DocumentJSON())
	})
	a.mux.HandleFunc("GET /openapi.yaml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(documentYAML)
	})
	a.mux.HandleFunc("GET /v2/customers", a.search)
	a.mux.HandleFunc("GET /v2/customers/{customerId}", a.customer)
	a.mux.HandleFunc("GET /v2/customers/{customerId}/orders", a.customerOrders)
	a.mux.HandleFunc("POST /v2/orders", a.createOrder)
	a.mux.HandleFunc("DELETE /v2/orders/{orderId}", a.cancelOrder)
	return a
}

func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

func (a *API) search(w http.ResponseWriter, r *http.Request) {
	q := strings.ToLower(r.URL.Query().Get("q"))
	tier := r.URL.Query().Get("tier")
	limit := 10
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 50 {
			fail(w, http.StatusBadRequest, "limit must be an integer from 1 to 50")
			return
		}
		limit = n
	}
	if q == "" {
		fail(w, http.StatusBadRequest, "q is required")
		return
	}
	out := []Customer{}
	for id := 1; id <= Customers && len(out) < limit; id++ {
		c, _ := CustomerByID(id)
		if strings.Contains(strings.ToLower(c.Name), q) && (tier == "" || c.Tier == tier) {
			out = append(out, c)
		}
	}
	reply(w, http.StatusOK, out)
}

func (a *API) customer(w http.ResponseWriter, r *http.Request) {
	c, ok := customerOf(w, r)
	if !ok {
		return
	}
	if slices.Contains(strings.Split(r.URL.Query().Get("expand"), ","), "orders") {
		c.Orders = a.ordersOf(c.ID, "")
	}
	reply(w, http.StatusOK, c)
}

func (a *API) customerOrders(w http.ResponseWriter, r *http.Request) {
	c, ok := customerOf(w, r)
	if !ok {
		return
	}
	if id := r.Header.Get("X-Request-Id"); id != "" {
		w.Header().Set("X-Request-Id", id)
	}
	reply(w, http.StatusOK, a.ordersOf(c.ID, r.URL.Query().Get("status")))
}

func (a *API) createOrder(w http.ResponseWriter, r *http.Request) {
	var in struct {
		CustomerID int    `json:"customerId"`
		Items      []Item `json:"items"`
		Note       string `json:"note"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in); err != nil {
		fail(w, http.StatusBadRequest, "the body is not a new order: "+err.Error())
		return
	}
	if _, ok := CustomerByID(in.CustomerID); !ok {
		fail(w, http.StatusNotFound, fmt.Sprintf("no customer %d", in.CustomerID))
		return
	}
	if len(in.Items) == 0 {
		fail(w, http.StatusBadRequest, "an order needs items")
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	key := r.Header.Get("Idempotency-Key")
	if id, ok := a.placed[key]; ok && key != "" {
		// The same request again: the order it placed, not another.
		for _, o := range a.orders {
			if o.ID == id {
				reply(w, http.StatusCreated, o)
				return
			}
		}
	}
	o := Order{ID: fmt.Sprintf("O-%d", 10000+len(a.orders)), CustomerID: in.CustomerID, Status: "open", Items: in.Items, Note: in.Note}
	a.orders = append(a.orders, o)
	if key != "" {
		a.placed[key] = o.ID
	}
	reply(w, http.StatusCreated, o)
}

func (a *API) cancelOrder(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("orderId")
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range a.orders {
		o := &a.orders[i]
		if o.ID != id {
			continue
		}
		if o.Status != "open" {
			fail(w, http.StatusConflict, fmt.Sprintf("order %s is %s, not open", id, o.Status))
			return
		}
		o.Status = "cancelled"
		w.WriteHeader(http.StatusNoContent)
		return
	}
	fail(w, http.StatusNotFound, fmt.Sprintf("no order %s", id))
}

// Orders returns the orders placed so far, oldest first.
func (a *API) Orders() []Order {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.orders)
}

// ordersOf is a customer's orders, newest first, of a status or all.
func (a *API) ordersOf(id int, status string) []Order {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := []Order{}
	for i := len(a.orders) - 1; i >= 0; i-- {
		if o := a.orders[i]; o.CustomerID == id && (status == "" || o.Status == status) {
			out = append(out, o)
		}
	}
	return out
}

func customerOf(w http.ResponseWriter, r *http.Request) (Customer, bool) {
	id, err := strconv.Atoi(r.PathValue("customerId"))
	if err != nil {
		fail(w, http.StatusBadRequest, "customerId must be an integer")
		return Customer{}, false
	}
	c, ok := CustomerByID(id)
	if !ok {
		fail(w, http.StatusNotFound, fmt.Sprintf("no customer %d", id))
	}
	return c, ok
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, status int, msg string) {
	reply(w, status, map[string]string{"error": msg})
}
