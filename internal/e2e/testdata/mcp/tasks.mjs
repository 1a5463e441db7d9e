// Drives the gateway's MCP tasks with the TypeScript SDK's own task client
// (@modelcontextprotocol/sdk 1.32, client.experimental.tasks, which speaks
// MCP 2025-11-25's tasks), one command at a time, so that the Go test can
// act between them (approve over the API, read Temporal).
//
// Reads commands as JSON lines on stdin, {id, op, client, ...}; writes
// JSON lines on stdout: {id, event} for what a command sees as it goes
// (a task stream's messages, the server's questions to a client), then
// {id, done} with its result, or {id, error: {code, message}}. Commands
// run at once, each on its own; a client is named by the test:
//
//   connect {client, url, token, elicit}  a session; elicit, if set, is the
//                                         content every elicitation accepts
//   stream  {client, name, prompt, ttl}   callToolStream with a task: each message
//   create  {client, name, prompt, ttl}   the same, until the task is created
//   get     {client, taskId}              tasks/get
//   result  {client, taskId}              tasks/result
//   cancel  {client, taskId}              tasks/cancel
//   list    {client, cursor}              tasks/list
//   call    {client, name, prompt}        a tools/call without a task
//   close   {client}
import readline from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const clients = new Map();
const write = (msg) => process.stdout.write(JSON.stringify(msg) + '\n');
const errorOf = (e) => ({ code: e?.code ?? null, message: String(e?.message ?? e) });

async function connect(id, { client: name, url, token, elicit }) {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: 'agentflow-e2e-tasks', version: '1' }, {
    capabilities: elicit ? { elicitation: { form: {} } } : {},
  });
  if (elicit) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      write({ id, event: { elicit: { message: req.params.message, meta: req.params._meta ?? {} } } });
      return { action: 'accept', content: elicit };
    });
  }
  await client.connect(transport);
  clients.set(name, client);
  const { tools } = await client.listTools();
  return {
    protocol: transport.protocolVersion,
    server: client.getServerVersion(),
    tasks: client.getServerCapabilities()?.tasks ?? null,
    tools: tools.map((t) => ({ name: t.name, execution: t.execution ?? null })),
  };
}

// stream yields what callToolStream does, as events; create stops at the task.
async function stream(id, { client, name, prompt, ttl }, untilCreated) {
  const messages = clients.get(client).experimental.tasks.callToolStream(
    { name, arguments: { prompt } }, CallToolResultSchema, { task: { ttl } });
  for await (const m of messages) {
    const event = { type: m.type, task: m.task, result: m.result, error: m.error && errorOf(m.error) };
    if (untilCreated && m.type === 'taskCreated') return m.task;
    write({ id, event });
    if (m.type === 'error') throw m.error;
  }
  return null;
}

async function run(id, cmd) {
  const client = clients.get(cmd.client);
  const tasks = client?.experimental.tasks;
  switch (cmd.op) {
    case 'connect': return connect(id, cmd);
    case 'stream': return stream(id, cmd, false);
    case 'create': return stream(id, cmd, true);
    case 'get': return tasks.getTask(cmd.taskId);
    case 'result': return tasks.getTaskResult(cmd.taskId, CallToolResultSchema);
    case 'cancel': return tasks.cancelTask(cmd.taskId);
    case 'list': return tasks.listTasks(cmd.cursor);
    case 'call': return client.callTool({ name: cmd.name, arguments: { prompt: cmd.prompt } });
    case 'close': await client.close(); clients.delete(cmd.client); return null;
  }
  throw new Error(`unknown op ${cmd.op}`);
}

for await (const line of readline.createInterface({ input: process.stdin })) {
  const cmd = JSON.parse(line);
  run(cmd.id, cmd).then((done) => write({ id: cmd.id, done: done ?? null }), (e) => write({ id: cmd.id, error: errorOf(e) }));
}
for (const client of clients.values()) await client.close();
