package contract

// Ingestion: documents stored into a knowledge collection by a workflow,
// so that a large batch survives a worker's death and a retried step
// stores nothing twice (knowledge.Store.Write is keyed by content hash).
const (
	// Ingest stores a batch of documents into one collection: input
	// IngestInput, result IngestStatus. One per (tenant, batch id),
	// id IngestWorkflowID. Its pages run one IngestPage each; it
	// continues as new every IngestInput.PagesPerRun pages, carrying its
	// counts, so that a batch of any size stays within Temporal's history
	// limits.
	Ingest = "Ingest"
	// IngestPage reads, parses, splits, embeds and stores one page of a
	// batch's documents: input IngestPageInput, result IngestPageResult.
	IngestPage = "IngestPage"
	// QueryIngestStatus answers an Ingest's IngestStatus so far.
	QueryIngestStatus = "ingest_status"
)

// IngestWorkflowID is the id of a tenant's ingest of batch id.
func IngestWorkflowID(tenantID, batchID string) string { return "ingest/" + tenantID + "/" + batchID }

// Limits of an ingest.
const (
	// IngestPageDocuments is the most documents one page (one IngestPage)
	// holds: a page is a unit of retry and progress.
	IngestPageDocuments = 50
	// IngestPageBytes bounds a page's manifest blob; a page is cut
	// earlier when its documents' inline texts reach it.
	IngestPageBytes = 4 << 20
	// DefaultIngestPagesPerRun is how many pages an Ingest run handles
	// before it continues as new: 100 pages of 50 documents is 5,000
	// documents and about 400 history events.
	DefaultIngestPagesPerRun = 100
	// IngestMaxErrors bounds the per-document errors an IngestStatus
	// keeps (the counts are whole).
	IngestMaxErrors = 20
)

// IngestDocument is one document of a batch as its page's manifest holds
// it: its text inline, or a ref to read it from — a cas:// blob of the
// tenant's (an upload to /v1/files, a tool's output) or a turn's result
// (artifact://, cas://), whose data is the text.
type IngestDocument struct {
	Title    string            `json:"title,omitempty"`
	Source   string            `json:"source,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// ContentType says how to read the text: text/plain, text/markdown,
	// text/html; "" takes a blob's own type, else text/plain.
	ContentType string `json:"content_type,omitempty"`
	Text        string `json:"text,omitempty"`
	Ref         string `json:"ref,omitempty"`
}

// IngestPageManifest is a page's documents, stored as a blob of the
// tenant's so that the workflow's history holds only its ref.
type IngestPageManifest struct {
	// First is the batch ordinal (0-based) of Documents[0].
	First     int              `json:"first"`
	Documents []IngestDocument `json:"documents"`
}

// IngestInput is an Ingest's input: the batch's pages by ref.
type IngestInput struct {
	TenantID   string `json:"tenant_id"`
	Collection string `json:"collection"`
	BatchID    string `json:"batch_id"`
	// Pages are the cas:// refs of the batch's IngestPageManifests, in
	// order.
	Pages     []string `json:"pages"`
	Documents int      `json:"documents"` // how many the pages hold
	// PagesPerRun: default DefaultIngestPagesPerRun.
	PagesPerRun int `json:"pages_per_run,omitempty"`
	// Next and Status carry a run's progress to the next (continue as
	// new): the first page left to do, and the counts so far.
	Next   int           `json:"next,omitempty"`
	Status *IngestStatus `json:"status,omitempty"`
}

// IngestPageInput names one page of a batch.
type IngestPageInput struct {
	TenantID   string `json:"tenant_id"`
	Collection string `json:"collection"`
	BatchID    string `json:"batch_id"`
	Page       int    `json:"page"`
	Ref        string `json:"ref"`
}

// IngestCounts count what an ingest did with its documents. A document
// is stored (new in the collection), existing (the collection held the
// same text: nothing stored) or failed (it could not be read or parsed:
// nothing of it stored).
type IngestCounts struct {
	Stored     int `json:"stored"`
	Existing   int `json:"existing"`
	Failed     int `json:"failed"`
	Chunks     int `json:"chunks"`     // chunks stored
	Embeddings int `json:"embeddings"` // texts embedded
	Tokens     int `json:"tokens"`     // tokens the embeddings used
}

// Add adds o to c.
func (c *IngestCounts) Add(o IngestCounts) {
	c.Stored += o.Stored
	c.Existing += o.Existing
	c.Failed += o.Failed
	c.Chunks += o.Chunks
	c.Embeddings += o.Embeddings
	c.Tokens += o.Tokens
}

// IngestError is why one document of a batch failed.
type IngestError struct {
	Document int    `json:"document"` // its batch ordinal
	Title    string `json:"title,omitempty"`
	Message  string `json:"message"`
}

// IngestPageResult is what IngestPage did with a page.
type IngestPageResult struct {
	IngestCounts
	DocumentIDs []string      `json:"document_ids,omitempty"` // of stored and existing documents, in page order
	Errors      []IngestError `json:"errors,omitempty"`
}

// Ingest states.
const (
	IngestRunning   = "running"
	IngestCompleted = "completed"
	IngestFailed    = "failed"
)

// IngestStatus is an ingest's progress: the Ingest workflow's query and
// result, and what GET /v1/ingests/{id} answers.
type IngestStatus struct {
	ID         string `json:"id"`
	Collection string `json:"collection"`
	State      string `json:"state"`
	Documents  int    `json:"documents"` // in the batch
	Done       int    `json:"done"`      // stored, existing or failed so far
	IngestCounts
	// Errors are the first IngestMaxErrors documents that failed.
	Errors []IngestError `json:"errors,omitempty"`
	// Error says why the ingest failed (State failed).
	Error string `json:"error,omitempty"`
}
