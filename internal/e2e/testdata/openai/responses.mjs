// Drives the gateway's Responses API with OpenAI's own Node.js client:
// a streamed response, and a background one whose stream is read up to
// the agent's tool call, left, and resumed after the last event read
// (retrieve with stream and starting_after). Reads {baseURL, token} on
// stdin; writes, for each, the response id, the text of its
// output_text deltas, the sequence numbers read, and the stored
// response's text and status, as JSON on stdout. Any error the client
// raises exits non-zero.
import OpenAI from 'openai';

let input = '';
for await (const chunk of process.stdin) input += chunk;
const { baseURL, token } = JSON.parse(input);
const client = new OpenAI({ baseURL, apiKey: token, maxRetries: 0 });

// read reads events until stop says so or the stream ends, into run.
async function read(stream, run, stop) {
  for await (const ev of stream) {
    run.Seqs.push(ev.sequence_number);
    if (ev.type === 'response.output_text.delta') run.Text += ev.delta;
    if (ev.type === 'response.created') run.ID = ev.response.id;
    if (ev.type === 'error') throw new Error(`error event: ${JSON.stringify(ev)}`);
    if (stop && stop(ev)) return ev.sequence_number;
  }
  return -1;
}

async function stored(run) {
  const r = await client.responses.retrieve(run.ID);
  run.Final = r.output_text;
  run.Status = r.status;
  return run;
}

const streamed = { ID: '', Text: '', Seqs: [], Left: 0 };
await read(await client.responses.create({ model: 'assistant', input: 'why?', stream: true }), streamed);

const background = { ID: '', Text: '', Seqs: [], Left: 0 };
const created = await client.responses.create({ model: 'assistant', input: 'What is 6 * 7?', background: true });
background.ID = created.id;
const first = await client.responses.retrieve(created.id, { stream: true });
background.Left = await read(first, background, (ev) => ev.type === 'response.output_item.added');
first.controller.abort();
await read(await client.responses.retrieve(created.id, { stream: true, starting_after: background.Left }), background);

process.stdout.write(JSON.stringify({ Streamed: await stored(streamed), Background: await stored(background) }));
