package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/tools"
	"github.com/agentflow/agentflow/internal/words"
)

// output is what the model reads of a tool's output: its text and, when
// it produced data, the data's ref and the data itself when small, else a
// preview. A dataset is always kept by ref, so that later steps, turns and
// workflows can use it; other data when it is large.
func (a *Activities) output(ctx context.Context, in contract.ExecuteToolInput, out tools.Output) (agent.Message, string) {
	parts, note, err := a.files(ctx, in.TenantID, out.Files)
	if err != nil {
		return agent.Message{Content: err.Error()}, ""
	}
	out.Text += note
	msg, status := a.dataOutput(ctx, in, out)
	if status == agent.ToolOK {
		msg.Parts, msg.Citations = parts, out.Citations
	}
	return msg, status
}

// files stores the files a call produced as the tenant's blobs, and
// returns them as parts by ref and a note for the model that names them.
// Files past tools.MaxFiles, or with Data over tools.MaxFileBytes, are
// left out and the note says so. A file the call stored itself (Ref)
// must be the tenant's; it is taken as it is, with its stored type
// unless the tool named one.
func (a *Activities) files(ctx context.Context, tenantID string, files []tools.File) ([]agent.Part, string, error) {
	var parts []agent.Part
	var note strings.Builder
	for i, f := range files {
		if i == tools.MaxFiles {
			fmt.Fprintf(&note, "\n(%d more files left out: a call keeps at most %d)", len(files)-i, tools.MaxFiles)
			break
		}
		if len(f.Data) > tools.MaxFileBytes {
			fmt.Fprintf(&note, "\n(file %d left out: %d bytes; the limit is %d)", i, len(f.Data), tools.MaxFileBytes)
			continue
		}
		info, err := a.storeFile(ctx, tenantID, f)
		if err != nil {
			return nil, "", err
		}
		mime := info.ContentType
		if f.Ref != "" && f.MIMEType != "" {
			mime = f.MIMEType
		}
		p := agent.Part{Type: agent.PartFile, URL: info.Ref, MIMEType: mime, Name: f.Name}
		if agent.IsImageType(mime) {
			p.Type = agent.PartImage
		}
		parts = append(parts, p)
		fmt.Fprintf(&note, "\n%s: %s (%s, %d bytes)", p.Type, info.Ref, mime, info.Size)
	}
	return parts, note.String(), nil
}

// storeFile stores a file's Data as the tenant's blob, or checks that the
// blob it names is the tenant's, and describes it.
func (a *Activities) storeFile(ctx context.Context, tenantID string, f tools.File) (agent.BlobInfo, error) {
	var info agent.BlobInfo
	if f.Ref != "" {
		err := a.db(ctx, "describe tool file", func() (err error) {
			info, err = a.store.TenantBlobInfo(ctx, tenantID, f.Ref)
			return err
		})
		if err != nil {
			return agent.BlobInfo{}, fmt.Errorf("the tool's file %s: %w", words.Clip(f.Ref, 100), err)
		}
		return info, nil
	}
	mime := f.MIMEType
	if mime == "" || mime == store.DefaultContentType {
		mime, _, _ = strings.Cut(http.DetectContentType(f.Data), ";")
	}
	err := a.db(ctx, "store tool file", func() (err error) {
		info.Ref, err = a.store.PutTenantBlob(ctx, tenantID, f.Data, mime)
		return err
	})
	if err != nil {
		return agent.BlobInfo{}, fmt.Errorf("store the tool's file: %w", err)
	}
	info.ContentType, info.Size = mime, int64(len(f.Data))
	return info, nil
}

// dataOutput is output's text and data part.
func (a *Activities) dataOutput(ctx context.Context, in contract.ExecuteToolInput, out tools.Output) (agent.Message, string) {
	msg := agent.Message{Content: out.Text, CacheHit: out.CacheHit}
	if len(out.Data) == 0 {
		if len(msg.Content) > agent.MaxToolOutputBytes {
			return agent.Message{Content: fmt.Sprintf("the tool's output is %d bytes; the limit is %d", len(msg.Content), agent.MaxToolOutputBytes)}, agent.ToolError
		}
		return msg, agent.ToolOK
	}
	var preview agent.DataPreview
	if out.Preview != nil {
		// A tool's own preview is bounded like the runtime's.
		preview = out.Preview.Bounded()
		preview.Bytes = len(out.Data)
	} else {
		var err error
		if preview, err = agent.PreviewOf(out.Data, "", agent.SampleRows); err != nil {
			return agent.Message{Content: fmt.Sprintf("the tool returned data that is not JSON: %v", err)}, agent.ToolError
		}
	}
	inline := len(out.Data) <= a.dataInlineBytes
	if preview.Type == agent.DataDataset || !inline {
		err := a.db(ctx, "store tool data", func() (err error) {
			preview.Ref, err = a.store.PutTenantBlob(ctx, in.TenantID, out.Data, "application/json")
			return err
		})
		if err != nil {
			return agent.Message{Content: fmt.Sprintf("store the tool's data: %v", err)}, ""
		}
		msg.Data = &preview
	}
	msg.Content = describeData(out.Text, preview, out.Data, inline && (out.ShowData || out.Text == ""), out.CacheHit)
	return msg, agent.ToolOK
}

// describeData writes what the model reads of a tool's data: the tool's
// text, the data's ref when it is kept, and the data itself when show,
// else a preview of a kept dataset.
func describeData(text string, p agent.DataPreview, data []byte, show, cacheHit bool) string {
	var b strings.Builder
	if text != "" {
		b.WriteString(text)
		b.WriteString("\n\n")
	}
	if p.Ref != "" {
		fmt.Fprintf(&b, "data: %s (%s", p.Ref, p.Type)
		if p.Type == agent.DataDataset {
			fmt.Fprintf(&b, ", %d rows", p.RowCount)
			var fields []string
			for _, f := range p.Fields {
				fields = append(fields, f.Name+" "+f.Type)
			}
			if len(fields) > 0 {
				fmt.Fprintf(&b, "; fields: %s", strings.Join(fields, ", "))
			}
		}
		if cacheHit {
			b.WriteString("; from the cache")
		}
		b.WriteString("). Pass the ref as input_ref to use it in a later call.\n")
	}
	if show {
		b.Write(data)
		return b.String()
	}
	if p.Ref == "" {
		return strings.TrimRight(b.String(), "\n")
	}
	fmt.Fprintf(&b, "It is %d bytes", p.Bytes)
	if len(p.Sample) > 0 {
		sample, _ := json.Marshal(p.Sample) // raw JSON rows re-encode as they are
		fmt.Fprintf(&b, "; the first %d rows: %s", len(p.Sample), sample)
	}
	b.WriteString(".")
	return b.String()
}

func (a *Activities) toolResult(ctx context.Context, callID string, msg agent.Message, status string) (contract.ExecuteToolResult, error) {
	preview, cut := truncate(msg.Content, a.previewBytes)
	res := contract.ExecuteToolResult{CallID: callID, Status: status, Preview: preview, Data: msg.Data, CacheHit: msg.CacheHit, Parts: msg.Parts, Citations: msg.Citations}
	if status == agent.ToolUnknown {
		res.Unknown = unknownOf(msg.Content).What
	}
	if cut {
		var ref string
		err := a.db(ctx, "store tool output", func() (err error) {
			ref, err = a.store.PutBlob(ctx, []byte(msg.Content), "text/plain; charset=utf-8")
			return err
		})
		if err != nil {
			return contract.ExecuteToolResult{}, fmt.Errorf("store tool output: %w", err)
		}
		res.Ref = ref
	}
	return res, nil
}

// toolCache keeps a tenant's tool results in the store.
type toolCache struct {
	a        *Activities
	tenantID string
}

func (c toolCache) Get(ctx context.Context, key string) (tools.Output, bool, error) {
	raw, ok, err := c.a.store.CachedTool(ctx, c.tenantID, key, time.Now())
	if err != nil || !ok {
		return tools.Output{}, false, err
	}
	var out cachedOutput
	if err := json.Unmarshal(raw, &out); err != nil {
		return tools.Output{}, false, nil // an entry this build cannot read is a miss
	}
	return tools.Output{Text: out.Text, Data: out.Data, ShowData: out.ShowData, Preview: out.Preview, CacheHit: true}, true, nil
}

func (c toolCache) Put(ctx context.Context, key string, out tools.Output, ttl time.Duration) error {
	if len(out.Files) > 0 {
		return nil // files are kept as blobs, not in cache rows
	}
	raw, err := json.Marshal(cachedOutput{Text: out.Text, Data: out.Data, ShowData: out.ShowData, Preview: out.Preview})
	if err != nil {
		return fmt.Errorf("encode cached output: %w", err)
	}
	return c.a.store.CacheTool(ctx, c.tenantID, key, raw, time.Now().Add(ttl))
}

type cachedOutput struct {
	Text     string             `json:"text"`
	Data     json.RawMessage    `json:"data,omitempty"`
	ShowData bool               `json:"show_data,omitempty"`
	Preview  *agent.DataPreview `json:"preview,omitempty"`
}
