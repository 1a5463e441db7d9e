// What a test needs to see of the wire: the UI message chunks a response
// carried, as the client received them.

// tapping is a fetch that gives the transport each response as it comes
// (through cut, when given: cut(body, init) is the body the client gets)
// and pushes on taps the promise of the chunks it carried (readChunks).
export function tapping(taps, cut) {
  return async (url, init) => {
    const res = await fetch(url, init);
    if (res.body == null || res.status === 204) return res;
    const [body, copy] = (cut == null ? res.body : cut(res.body, init)).tee();
    taps.push(readChunks(copy));
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

// readChunks reads a UI message stream's Server-Sent Events to their end
// (or to where the connection broke) and parses their data: the chunks,
// and when each arrived (ms since the response's head).
async function readChunks(stream) {
  const start = performance.now();
  const chunks = [];
  const at = [];
  const decoder = new TextDecoder();
  let text = '';
  const take = () => {
    let end;
    while ((end = text.indexOf('\n\n')) >= 0) {
      for (const line of text.slice(0, end).split('\n')) {
        if (!line.startsWith('data: ')) continue;
        const data = line.slice('data: '.length);
        chunks.push(data === '[DONE]' ? { type: '[DONE]' } : JSON.parse(data));
        at.push(performance.now() - start);
      }
      text = text.slice(end + 2);
    }
  };
  try {
    for await (const b of stream) {
      text += decoder.decode(b, { stream: true });
      take();
    }
  } catch {
    // the connection broke: what came before it counts
  }
  return { chunks, at };
}

// cutAfter is a cut that breaks the first POST's connection once n
// text-delta chunks have come through: it closes the connection and the
// client's read fails as a browser's does when the network goes (a
// TypeError that says so), which the SDK's chat takes for a disconnect
// it can resume from.
export function cutAfter(n) {
  let used = false;
  return (body, init) => {
    if (used || init.method !== 'POST') return body;
    used = true;
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let seen = 0;
    return new ReadableStream({
      async pull(c) {
        if (seen >= n) {
          await reader.cancel();
          c.error(new TypeError('network error'));
          return;
        }
        const { done, value } = await reader.read();
        if (done) {
          c.close();
          return;
        }
        seen += decoder.decode(value, { stream: true }).split('"type":"text-delta"').length - 1;
        c.enqueue(value);
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    });
  };
}
