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
    let end;
    while ((end = this.buffer.indexOf('\n')) >= 0) {
      const line = this.buffer.slice(0, end).replace(/\r$/, '');
      this.buffer = this.buffer.slice(end + 1);
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
    return events;
  }
}
