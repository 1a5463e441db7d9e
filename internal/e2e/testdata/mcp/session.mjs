// Drives the gateway's MCP server with the TypeScript SDK's own client
// (@modelcontextprotocol/sdk 1.32, which speaks MCP up to 2025-11-25):
// it initializes a session over Streamable HTTP, lists the tools, calls
// one with a progress token and checks the result against the SDK's
// schema. Reads {url, token, tool, prompt} on stdin; writes {protocol,
// session, tools, text, progress, streamId} as JSON on stdout. Any error
// the SDK raises exits non-zero.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

let input = '';
for await (const chunk of process.stdin) input += chunk;
const { url, token, tool, prompt } = JSON.parse(input);

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: 'agentflow-e2e', version: '1' });
await client.connect(transport);
const tools = await client.listTools();
const progress = [];
const res = await client.callTool({ name: tool, arguments: { prompt } }, undefined, {
  onprogress: (p) => progress.push(p.message ?? ''),
});
const out = {
  protocol: transport.protocolVersion,
  session: transport.sessionId ?? '',
  tools: tools.tools.map((t) => t.name),
  text: res.content.filter((c) => c.type === 'text').map((c) => c.text).join(''),
  isError: res.isError ?? false,
  progress,
  streamId: res._meta?.['agentflow/stream_id'] ?? '',
};
await client.close();
process.stdout.write(JSON.stringify(out));
