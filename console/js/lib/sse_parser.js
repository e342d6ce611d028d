// @ts-check
// The text/event-stream parser, apart from the network so it can be tested alone: feed it decoded chunks as they
// arrive (a line or an event may be split anywhere), get back each complete event's JSON data and id.

/** @typedef {{ data: any, id: string | null }} SseEvent */

export class SseParser {
  constructor() {
    this.buffer = '';
    /** @type {string | null} */
    this.id = null;
    /** @type {string[]} */
    this.data = [];
  }

  /**
   * The events completed by `chunk`. Comment lines (`: keep-alive`) and fields other than `id` and `data` are
   * skipped; an event without data is not delivered. Throws when an event's data is not JSON.
   * @param {string} chunk
   * @returns {SseEvent[]}
   */
  push(chunk) {
    this.buffer += chunk;
    /** @type {SseEvent[]} */
    const events = [];
    // One pass over the buffer, cut once at the end: a chunk of a thousand events costs one copy, not a thousand.
    let start = 0;
    let end;
    while ((end = this.buffer.indexOf('\n', start)) >= 0) {
      const line = this.buffer.slice(start, this.buffer[end - 1] === '\r' && end > start ? end - 1 : end);
      start = end + 1;
      if (line === '') {
        if (this.data.length) events.push({ data: JSON.parse(this.data.join('\n')), id: this.id });
        this.data = [];
        this.id = null;
      } else if (line.startsWith('id:')) {
        this.id = line.slice(3).trim();
      } else if (line.startsWith('data:')) {
        this.data.push(line.slice(5).trimStart());
      }
    }
    this.buffer = this.buffer.slice(start);
    return events;
  }
}
