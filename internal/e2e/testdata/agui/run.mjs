// Drives the gateway's AG-UI door with AG-UI's own client: HttpAgent
// (@ag-ui/client) runs the agents, and every event the door sends is read
// off the wire as well and validated with @ag-ui/core's EventSchemas.
// Reads {api, token, thread, carefulThread, planThread, runs: {first,
// asked, resumed, question, answered}}
// on stdin; writes, for each run, the wire events and what the client
// made of them (its messages, its pending interrupts, the run's result)
// as JSON on stdout. Any error the client or a schema raises exits
// non-zero.
import { HttpAgent } from '@ag-ui/client';
import { EventSchemas } from '@ag-ui/core/schemas';

let input = '';
for await (const chunk of process.stdin) input += chunk;
const { api, token, thread, carefulThread, planThread, runs } = JSON.parse(input);

// wire holds the events of the run in progress, as the door sent them.
let wire = [];

// tee is fetch, reading a copy of the answer's Server-Sent Events for
// wire: each data line one event, validated by the protocol's schema.
async function tee(url, init) {
  const res = await fetch(url, init);
  if (!res.ok || !res.body) return res;
  const copy = res.clone();
  const read = (async () => {
    const text = await copy.text();
    for (const block of text.split('\n\n')) {
      const data = block.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
      if (!data) continue;
      const event = JSON.parse(data);
      const parsed = EventSchemas.safeParse(event);
      if (!parsed.success) {
        throw new Error(`event ${wire.length} is not a valid AG-UI event: ${data}: ${parsed.error.message}`);
      }
      wire.push(event);
    }
  })();
  tee.pending.push(read);
  return res;
}
tee.pending = [];

// run runs agent once with params, and gives what the client and the
// wire made of it.
async function run(agent, params) {
  wire = [];
  tee.pending = [];
  const { result, newMessages } = await agent.runAgent(params);
  await Promise.all(tee.pending);
  return {
    events: wire,
    result: result ?? null,
    newMessages,
    messages: agent.messages,
    pendingInterrupts: agent.pendingInterrupts,
  };
}

const headers = { Authorization: `Bearer ${token}` };
const user = (id, content) => ({ id, role: 'user', content });

// A one-tool turn with reasoning.
const assistant = new HttpAgent({ url: `${api}/ag-ui/assistant`, headers, threadId: thread, fetch: tee });
assistant.addMessage(user('q1', 'What is 12.5 * 4?'));
const first = await run(assistant, { runId: runs.first });

// A call that waits for approval: the run ends with an interrupt, and the
// next run resumes it, approved.
const careful = new HttpAgent({ url: `${api}/ag-ui/careful`, headers, threadId: carefulThread, fetch: tee });
careful.addMessage(user('q2', 'Carefully, what is 6 * 7?'));
const asked = await run(careful, { runId: runs.asked });
const resume = careful.pendingInterrupts.map((i) => ({
  interruptId: i.id, status: 'resolved', payload: { approved: true, reason: 'checked' },
}));
const resumed = await run(careful, { runId: runs.resumed, resume });

// A question: an input_required interrupt, answered by the next run.
const planner = new HttpAgent({ url: `${api}/ag-ui/planner`, headers, threadId: planThread, fetch: tee });
planner.addMessage(user('q3', 'Book a trip'));
const question = await run(planner, { runId: runs.question });
const answers = planner.pendingInterrupts.map((i) => ({ interruptId: i.id, status: 'resolved', payload: { answer: 'Rome' } }));
const answered = await run(planner, { runId: runs.answered, resume: answers });

process.stdout.write(JSON.stringify({ first, asked, resumed, question, answered }));
