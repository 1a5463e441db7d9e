// Runs the agent through the gateway's AG-UI door with AG-UI's own
// client, HttpAgent: runAgent under the caller's runId and, when the
// stream breaks, the same run again (the same runId and messages), which
// the door answers with the same run from its start.
// Reads {url, token, runId, threadId, prompt, maxResumes} on stdin;
// writes {id, text, deltas, ids, resumed, errors, failure} on stdout: the
// run the last stream said it was, the answer the agent's messages hold,
// the text deltas of that stream, the run and message ids every stream
// started (one of each, however many streams: the run sent again is the
// same run, with the same message), how often it ran again and why.
import { HttpAgent } from '@ag-ui/client';

let input = '';
for await (const chunk of process.stdin) input += chunk;
const { url, token, runId, threadId, prompt, maxResumes } = JSON.parse(input);

const question = { id: 'q1', role: 'user', content: prompt };
const agent = new HttpAgent({ url, headers: { Authorization: `Bearer ${token}` }, threadId, initialMessages: [question] });
const sleep = ms => new Promise(r => setTimeout(r, ms));
const ids = new Set();

const errors = [];
// A broken stream rejects runAgent's promise, which is handled below, and
// also a promise inside the client that no caller can reach (1.0.0): in a
// browser that is a console error, not the end of the page.
process.on('unhandledRejection', err => { errors.push(`unhandled: ${err?.message ?? err}`); });
for (let resumed = 0; resumed <= maxResumes; resumed++) {
  if (resumed > 0) await sleep(200);
  // The same run: the messages it was sent with, not what the broken
  // stream added to them.
  agent.setMessages([question]);
  const deltas = [];
  let started = '', finished = false, error = '';
  try {
    await agent.runAgent({ runId }, {
      onRunStartedEvent({ event }) { started = event.runId; ids.add(`run ${event.runId}`); },
      onTextMessageStartEvent({ event }) { ids.add(`message ${event.messageId}`); },
      onTextMessageContentEvent({ event }) { deltas.push(event.delta); },
      onRunFinishedEvent() { finished = true; },
      onRunErrorEvent({ event }) { error = `RUN_ERROR: ${event.message}`; },
    });
  } catch (err) {
    error = error || String(err?.message ?? err);
  }
  if (finished && !error) {
    const text = agent.messages.filter(m => m.role === 'assistant').map(m => m.content ?? '').join('');
    process.stdout.write(JSON.stringify({ id: started, text, deltas: deltas.join(''), ids: [...ids], resumed, errors }));
    process.exit(0);
  }
  errors.push(error || 'the stream ended before RUN_FINISHED');
}
process.stdout.write(JSON.stringify({ resumed: maxResumes, errors, failure: `the stream broke ${maxResumes + 1} times` }));
