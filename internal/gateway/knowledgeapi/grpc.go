package knowledgeapi

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// knowledgeService implements pb.KnowledgeServiceServer: each method
// converts its message, calls core or the core's Memories (the rules the
// HTTP routes follow too) and converts the answer. The caller's tenant
// and user are the credential's; roles are the core's methodRoles'.
type knowledgeService struct {
	pb.UnimplementedKnowledgeServiceServer
	a *API
}

// RegisterGRPC adds KnowledgeService to g.
func (a *API) RegisterGRPC(g grpc.ServiceRegistrar) {
	pb.RegisterKnowledgeServiceServer(g, knowledgeService{a: a})
}

// withCore calls fn with the knowledge API (errNoKnowledge without a
// store) and answers what it returns, its error as the call's status.
func withCore[Out any](ctx context.Context, k knowledgeService, fn func(*core) (Out, error)) (Out, error) {
	var none Out
	if k.a.knowledge == nil {
		return none, k.a.c.StatusOf(ctx, errNoKnowledge)
	}
	out, err := fn(k.a.knowledge)
	if err != nil {
		return none, k.a.c.StatusOf(ctx, err)
	}
	return out, nil
}

// CreateCollection implements pb.KnowledgeServiceServer.
func (k knowledgeService) CreateCollection(ctx context.Context, in *pb.CreateCollectionRequest) (*pb.Collection, error) {
	return withCore(ctx, k, func(core *core) (*pb.Collection, error) {
		c, err := core.createCollection(ctx, collectionRequest{Name: in.GetName(), Description: in.GetDescription(),
			EmbeddingModel: in.GetEmbeddingModel(), Dims: int(in.GetDims())})
		if err != nil {
			return nil, err
		}
		return toPBCollection(c), nil
	})
}

// ListCollections implements pb.KnowledgeServiceServer.
func (k knowledgeService) ListCollections(ctx context.Context, _ *pb.ListCollectionsRequest) (*pb.ListCollectionsResponse, error) {
	return withCore(ctx, k, func(core *core) (*pb.ListCollectionsResponse, error) {
		list, err := core.collections(ctx)
		if err != nil {
			return nil, err
		}
		return &pb.ListCollectionsResponse{Collections: toPBList(list, toPBCollection)}, nil
	})
}

// GetCollection implements pb.KnowledgeServiceServer.
func (k knowledgeService) GetCollection(ctx context.Context, in *pb.GetCollectionRequest) (*pb.Collection, error) {
	return withCore(ctx, k, func(core *core) (*pb.Collection, error) {
		c, err := core.collection(ctx, in.GetName())
		if err != nil {
			return nil, err
		}
		return toPBCollection(c), nil
	})
}

// DeleteCollection implements pb.KnowledgeServiceServer.
func (k knowledgeService) DeleteCollection(ctx context.Context, in *pb.DeleteCollectionRequest) (*pb.DeleteCollectionResponse, error) {
	return withCore(ctx, k, func(core *core) (*pb.DeleteCollectionResponse, error) {
		if err := core.deleteCollection(ctx, in.GetName()); err != nil {
			return nil, err
		}
		return &pb.DeleteCollectionResponse{}, nil
	})
}

// IngestDocuments implements pb.KnowledgeServiceServer. The message is
// bounded by the server's message limit; larger documents go to
// /v1/files first, and are named by ref.
func (k knowledgeService) IngestDocuments(ctx context.Context, in *pb.IngestDocumentsRequest) (*pb.IngestDocumentsResponse, error) {
	return withCore(ctx, k, func(core *core) (*pb.IngestDocumentsResponse, error) {
		c, err := core.collection(ctx, in.GetCollection())
		if err != nil {
			return nil, err
		}
		req := ingestRequest{ID: in.GetId()}
		for _, d := range in.GetDocuments() {
			req.Documents = append(req.Documents, contract.IngestDocument{Title: d.GetTitle(), Source: d.GetSource(), Metadata: d.GetMetadata(),
				ContentType: d.GetContentType(), Text: d.GetText(), Ref: d.GetRef()})
		}
		answer, err := core.ingest(ctx, c, req)
		if err != nil {
			return nil, err
		}
		return &pb.IngestDocumentsResponse{Id: answer.ID, Collection: answer.Collection, Documents: int32(answer.Documents), WorkflowId: answer.WorkflowID}, nil
	})
}

// GetIngest implements pb.KnowledgeServiceServer.
func (k knowledgeService) GetIngest(ctx context.Context, in *pb.GetIngestRequest) (*pb.IngestStatus, error) {
	return withCore(ctx, k, func(core *core) (*pb.IngestStatus, error) {
		st, err := core.ingestStatus(ctx, in.GetId())
		if err != nil {
			return nil, err
		}
		out := &pb.IngestStatus{Id: st.ID, Collection: st.Collection, State: st.State, Documents: int32(st.Documents), Done: int32(st.Done),
			Stored: int32(st.Stored), Existing: int32(st.Existing), Failed: int32(st.Failed), Chunks: int32(st.Chunks),
			Embeddings: int32(st.Embeddings), Tokens: int64(st.Tokens), Error: st.Error}
		for _, e := range st.Errors {
			out.Errors = append(out.Errors, &pb.IngestError{Document: int32(e.Document), Title: e.Title, Message: e.Message})
		}
		return out, nil
	})
}

// ListDocuments implements pb.KnowledgeServiceServer.
func (k knowledgeService) ListDocuments(ctx context.Context, in *pb.ListDocumentsRequest) (*pb.ListDocumentsResponse, error) {
	return withCore(ctx, k, func(core *core) (*pb.ListDocumentsResponse, error) {
		docs, next, err := core.documents(ctx, in.GetCollection(), in.GetAfter(), int(in.GetLimit()))
		if err != nil {
			return nil, err
		}
		return &pb.ListDocumentsResponse{NextAfter: next, Documents: toPBList(docs, toPBDocument)}, nil
	})
}

// GetDocument implements pb.KnowledgeServiceServer.
func (k knowledgeService) GetDocument(ctx context.Context, in *pb.GetDocumentRequest) (*pb.Document, error) {
	return withCore(ctx, k, func(core *core) (*pb.Document, error) {
		d, err := core.document(ctx, in.GetCollection(), in.GetId())
		if err != nil {
			return nil, err
		}
		return toPBDocument(d), nil
	})
}

// DeleteDocument implements pb.KnowledgeServiceServer.
func (k knowledgeService) DeleteDocument(ctx context.Context, in *pb.DeleteDocumentRequest) (*pb.DeleteDocumentResponse, error) {
	return withCore(ctx, k, func(core *core) (*pb.DeleteDocumentResponse, error) {
		if err := core.deleteDocument(ctx, in.GetCollection(), in.GetId()); err != nil {
			return nil, err
		}
		return &pb.DeleteDocumentResponse{}, nil
	})
}

// SearchCollection implements pb.KnowledgeServiceServer.
func (k knowledgeService) SearchCollection(ctx context.Context, in *pb.SearchCollectionRequest) (*pb.SearchCollectionResponse, error) {
	return withCore(ctx, k, func(core *core) (*pb.SearchCollectionResponse, error) {
		hits, usage, err := core.search(ctx, agent.ChannelGRPC, in.GetCollection(),
			searchRequest{Query: in.GetQuery(), Mode: in.GetMode(), TopK: int(in.GetTopK()), Filter: in.GetFilter()})
		if err != nil {
			return nil, err
		}
		out := &pb.SearchCollectionResponse{PromptTokens: int64(usage.PromptTokens)}
		for _, h := range hits {
			out.Hits = append(out.Hits, &pb.Hit{ChunkId: h.Chunk.ID, DocumentId: h.Chunk.DocumentID, DocumentTitle: h.DocumentTitle,
				Position: int32(h.Chunk.Position), Text: h.Chunk.Text, Metadata: h.Chunk.Metadata, Score: h.Score,
				TextRank: int32(h.TextRank), VectorRank: int32(h.VectorRank)})
		}
		return out, nil
	})
}

// ListMemories implements pb.KnowledgeServiceServer.
func (k knowledgeService) ListMemories(ctx context.Context, in *pb.ListMemoriesRequest) (*pb.ListMemoriesResponse, error) {
	list, next, err := k.a.memories.List(ctx, in.GetAgentId(), in.GetBefore(), int(in.GetLimit()))
	if err != nil {
		return nil, k.a.c.StatusOf(ctx, err)
	}
	out := &pb.ListMemoriesResponse{Next: next}
	for _, m := range list {
		out.Memories = append(out.Memories, &pb.Memory{Id: m.ID, AgentId: m.AgentID, Text: m.Text, Tags: m.Tags, Source: m.Source,
			Origin: m.Origin, CreatedAt: timestamppb.New(m.Created)})
	}
	return out, nil
}

// DeleteMemory implements pb.KnowledgeServiceServer.
func (k knowledgeService) DeleteMemory(ctx context.Context, in *pb.DeleteMemoryRequest) (*pb.DeleteMemoryResponse, error) {
	if err := k.a.memories.Forget(ctx, in.GetAgentId(), in.GetId()); err != nil {
		return nil, k.a.c.StatusOf(ctx, err)
	}
	return &pb.DeleteMemoryResponse{}, nil
}

// EraseMemories implements pb.KnowledgeServiceServer.
func (k knowledgeService) EraseMemories(ctx context.Context, in *pb.EraseMemoriesRequest) (*pb.EraseMemoriesResponse, error) {
	n, err := k.a.memories.Erase(ctx, in.GetAgentId(), in.GetSubject(), in.GetIssuer(), in.GetName())
	if err != nil {
		return nil, k.a.c.StatusOf(ctx, err)
	}
	return &pb.EraseMemoriesResponse{Deleted: int32(n)}, nil
}

func toPBCollection(c agent.Collection) *pb.Collection {
	return &pb.Collection{Name: c.Name, Description: c.Description, EmbeddingModel: c.EmbeddingModel, Dims: int32(c.Dims),
		CreatedAt: timestamppb.New(c.Created)}
}

func toPBDocument(d agent.Document) *pb.Document {
	return &pb.Document{Id: d.ID, Collection: d.Collection, Title: d.Title, Source: d.Source, Metadata: d.Metadata,
		ContentHash: d.ContentHash, Size: int32(d.Size), Chunks: int32(d.Chunks), CreatedAt: timestamppb.New(d.Created)}
}

// toPBList converts each of in with f, in order; nil for none, as a
// message with no items has (the core's own, for the API's messages).
func toPBList[S, T any](in []S, f func(S) *T) []*T {
	if len(in) == 0 {
		return nil
	}
	out := make([]*T, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}
