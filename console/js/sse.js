// @ts-check
// Server-sent events over fetch (an EventSource cannot send the Authorization header). Reconnects after a dropped
// connection with Last-Event-ID, so the server replays what was missed: no gaps; callers drop duplicates by id.

import { authHeaders, refresh } from './api.js';
import { SseParser } from './lib/sse_parser.js';

/**
 * Follows `path` until `stop()` or until the server ends a stream that `finished()` says is complete.
 * `onEvent(data, id)` gets each event; `onState('live' | 'reconnecting' | 'ended')` the connection's state.
 * @param {string} path
 * @param {{ lastEventId?: string | null, onEvent: (data: any, id: string | null) => void,
 *   onState?: (state: 'live' | 'reconnecting' | 'ended') => void, finished?: () => boolean }} options
 */
export function follow(path, { lastEventId = null, onEvent, onState = () => {}, finished = () => false }) {
  let controller = new AbortController();
  let last = lastEventId;
  let stopped = false;
  let delay = 250;

  const run = async () => {
    while (!stopped) {
      controller = new AbortController();
      try {
        const headers = authHeaders(path);
        if (last) headers['Last-Event-ID'] = last;
        const response = await fetch(path, { headers, signal: controller.signal, credentials: 'same-origin' });
        if (response.status === 401) {
          await refresh();
          continue;
        }
        if (!response.ok) throw new Error(`stream answered ${response.status}`);
        onState('live');
        delay = 250;
        await read(response.body, (data, id) => {
          if (id) last = id;
          onEvent(data, id);
        });
        if (finished()) {
          onState('ended');
          return;
        }
      } catch {
        if (stopped) return;
      }
      if (stopped) return;
      onState('reconnecting');
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 5000);
    }
  };
  run();
  return {
    stop() {
      stopped = true;
      controller.abort();
    },
    /** Drops the connection and resumes after the last event (after `stream.lagged`, say). */
    reconnect() {
      controller.abort();
    },
    get lastEventId() {
      return last;
    },
  };
}

/**
 * Delivers each event of a response body as it completes.
 * @param {ReadableStream<any>} body
 * @param {(data: any, id: string | null) => void} deliver
 */
async function read(body, deliver) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  const parser = new SseParser();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    for (const event of parser.push(value)) deliver(event.data, event.id);
  }
}
