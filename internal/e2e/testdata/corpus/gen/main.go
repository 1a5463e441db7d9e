// Command gen writes the knowledge corpus beside it: documents.json, a
// few hundred short documents about made-up products, places and people
// that no model knows, and questions.json, questions whose answer is in
// exactly one of them. It is deterministic: the same program writes the
// same bytes.
//
//	go run ./internal/e2e/testdata/corpus/gen
package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// Document is one document of the corpus, as POST
// /v1/collections/{name}/documents takes it.
type Document struct {
	Title       string            `json:"title"`
	ContentType string            `json:"content_type"`
	Text        string            `json:"text"`
	Metadata    map[string]string `json:"metadata"`
}

// Question is asked of the corpus; Answer is in the document titled
// Document.
type Question struct {
	Question string `json:"question"`
	Answer   string `json:"answer"`
	Document string `json:"document"`
}

const perKind = 100

var (
	onsets  = []string{"b", "br", "c", "d", "dr", "f", "g", "gl", "k", "kr", "l", "m", "n", "p", "qu", "r", "s", "st", "t", "tr", "v", "w", "z", "th", "sh"}
	vowels  = []string{"a", "e", "i", "o", "u", "ai", "ea", "ou", "y"}
	codas   = []string{"", "n", "r", "l", "x", "th", "nd", "sk", "m", "v", "rk", "ll"}
	things  = []string{"lantern", "kettle", "compass", "loom", "telescope", "bicycle", "clock", "harp", "stove", "drone", "kayak", "press"}
	colours = []string{"amber", "teal", "crimson", "ochre", "slate", "violet", "jade", "ivory", "copper", "indigo"}
	trades  = []string{"glassblower", "cartographer", "beekeeper", "clockmaker", "ferry pilot", "botanist", "luthier", "astronomer", "cheesemaker", "lighthouse keeper"}
	foods   = []string{"smoked eel", "plum dumplings", "barley soup", "salt bread", "fig cake", "nettle pie", "honey rolls", "pickled pears"}
	rivers  = []string{"river", "lake", "fjord", "canal", "bay"}
)

// gen makes unique made-up names.
type gen struct {
	r    *rand.Rand
	seen map[string]bool
}

func (g *gen) word(syllables int) string {
	var b strings.Builder
	for range syllables {
		b.WriteString(onsets[g.r.IntN(len(onsets))])
		b.WriteString(vowels[g.r.IntN(len(vowels))])
		b.WriteString(codas[g.r.IntN(len(codas))])
	}
	w := b.String()
	return strings.ToUpper(w[:1]) + w[1:]
}

func (g *gen) name(syllables int) string {
	for {
		w := g.word(syllables)
		if !g.seen[w] && len(w) > 4 {
			g.seen[w] = true
			return w
		}
	}
}

func (g *gen) pick(list []string) string { return list[g.r.IntN(len(list))] }

func main() {
	g := &gen{r: rand.New(rand.NewPCG(47, 2026)), seen: map[string]bool{}}
	var docs []Document
	var qs []Question
	places := make([]string, perKind)
	for i := range places {
		places[i] = g.name(3)
	}
	makers := make([]string, 20)
	for i := range makers {
		makers[i] = g.name(2) + " Works"
	}
	for range perKind {
		thing := g.pick(things)
		p := g.name(2) + " " + strings.ToUpper(thing[:1]) + thing[1:]
		maker, town := makers[g.r.IntN(len(makers))], places[g.r.IntN(len(places))]
		grams, hours, year, price := 200+g.r.IntN(4800), 5+g.r.IntN(200), 1950+g.r.IntN(70), 10+g.r.IntN(990)
		colour := g.pick(colours)
		text := fmt.Sprintf("# %s\n\nThe %s is made by %s in the town of %s. It was first sold in %d and costs %d crowns.\n\n"+
			"## Specifications\n\nIt weighs %d grams and comes in %s. Its battery lasts %d hours on a full charge.",
			p, p, maker, town, year, price, grams, colour, hours)
		docs = append(docs, Document{Title: p, ContentType: "text/markdown", Text: text, Metadata: map[string]string{"kind": "product"}})
		qs = append(qs,
			Question{fmt.Sprintf("How many hours does the battery of the %s last?", p), fmt.Sprint(hours), p},
			Question{fmt.Sprintf("Who makes the %s?", p), maker, p})
	}
	for i := range perKind {
		town := places[i]
		pop, founded := 300+g.r.IntN(90000), 900+g.r.IntN(1000)
		water, dish := g.name(2)+" "+g.pick(rivers), g.pick(foods)
		festival := g.name(2) + " Festival"
		if i%5 == 0 {
			html := fmt.Sprintf("<!doctype html><html><head><title>%s</title><style>p{margin:0}</style></head><body>"+
				"<h1>%s</h1><p>%s lies on the %s and has %d inhabitants. It was founded in %d.</p>"+
				"<h2>Customs</h2><p>Every spring the town holds the %s, where people eat %s.</p><script>track()</script></body></html>",
				town, town, town, water, pop, founded, festival, dish)
			docs = append(docs, Document{Title: town, ContentType: "text/html", Text: html, Metadata: map[string]string{"kind": "place"}})
		} else {
			text := fmt.Sprintf("# %s\n\n%s lies on the %s and has %d inhabitants. It was founded in %d.\n\n"+
				"## Customs\n\nEvery spring the town holds the %s, where people eat %s.", town, town, water, pop, founded, festival, dish)
			docs = append(docs, Document{Title: town, ContentType: "text/markdown", Text: text, Metadata: map[string]string{"kind": "place"}})
		}
		qs = append(qs,
			Question{fmt.Sprintf("Which festival does %s hold every spring?", town), festival, town},
			Question{fmt.Sprintf("How many inhabitants does %s have?", town), fmt.Sprint(pop), town})
	}
	for range perKind {
		person := g.name(2) + " " + g.name(3)
		trade, town, born := g.pick(trades), places[g.r.IntN(len(places))], 1900+g.r.IntN(100)
		pet := g.name(2)
		text := fmt.Sprintf("%s was born in %d in %s and worked as a %s. %s kept a %s goat named %s and wrote %d books.",
			person, born, town, trade, person, g.pick(colours), pet, 1+g.r.IntN(30))
		docs = append(docs, Document{Title: person, ContentType: "text/plain", Text: text, Metadata: map[string]string{"kind": "person"}})
		qs = append(qs,
			Question{fmt.Sprintf("What was the name of %s's goat?", person), pet, person},
			Question{fmt.Sprintf("What did %s work as?", person), trade, person})
	}
	dir := filepath.Join("internal", "e2e", "testdata", "corpus")
	write(filepath.Join(dir, "documents.json"), docs)
	write(filepath.Join(dir, "questions.json"), qs)
}

func write(path string, v any) {
	data, err := json.MarshalIndent(v, "", " ")
	if err == nil {
		err = os.WriteFile(path, append(data, '\n'), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
