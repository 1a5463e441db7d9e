// What a test needs to see of the wire: the UI message chunks a response
// carried, as the client read them, and a connection that breaks.

// tapping is a fetch that gives the transport each response's body as
// the client reads it, and pushes on taps the promise of what it carried:
// {chunks, at}, the chunks and when each arrived (ms after the
// response's head). cut(init), when given, is the number of text-delta
// chunks after which the response's connection breaks (none when it
// gives nothing): the connection stalls a moment, so that the client has
// taken in what came, then closes, and the client's read fails as a
// browser's does when the network goes (a TypeError that says so), which
// the SDK's chat takes for a disconnect it can resume from.
export function tapping(taps, cut) {
  return async (url, init) => {
    const res = await fetch(url, init);
    if (res.body == null || res.status === 204) return res;
    const tap = new Tap();
    taps.push(tap.done);
    const breakAfter = cut?.(init);
    const reader = res.body.getReader();
    const body = new ReadableStream({
      async pull(c) {
        if (breakAfter != null && tap.deltas >= breakAfter) {
          await new Promise((r) => setTimeout(r, 200));
          await reader.cancel();
          tap.end();
          c.error(new TypeError('network error'));
          return;
        }
        const { done, value } = await reader.read();
        if (done) {
          tap.end();
          c.close();
          return;
        }
        tap.add(value);
        c.enqueue(value);
      },
      cancel(reason) {
        tap.end();
        return reader.cancel(reason);
      },
    }, { highWaterMark: 0 }); // read from the network only when the client asks
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

// cutAfter is a cut that breaks the first POST's connection after n text
// deltas.
export function cutAfter(n) {
  let used = false;
  return (init) => {
    if (used || init.method !== 'POST') return undefined;
    used = true;
    return n;
  };
}

// Tap parses a UI message stream's Server-Sent Events from its bytes.
class Tap {
  chunks = [];
  at = [];
  deltas = 0;
  #text = '';
  #decoder = new TextDecoder();
  #start = performance.now();
  #resolve;
  done = new Promise((r) => { this.#resolve = r; });

  add(bytes) {
    this.#text += this.#decoder.decode(bytes, { stream: true });
    let end;
    while ((end = this.#text.indexOf('\n\n')) >= 0) {
      for (const line of this.#text.slice(0, end).split('\n')) {
        if (!line.startsWith('data: ')) continue;
        const data = line.slice('data: '.length);
        const chunk = data === '[DONE]' ? { type: '[DONE]' } : JSON.parse(data);
        if (chunk.type === 'text-delta') this.deltas++;
        this.chunks.push(chunk);
        this.at.push(performance.now() - this.#start);
      }
      this.#text = this.#text.slice(end + 2);
    }
  }

  end() {
    this.#resolve({ chunks: this.chunks, at: this.at });
  }
}
