// The suite's test environment: Node's, plus one rule: a test file's timers end with the file.
//
// A timer a finished file left pending keeps its jest worker alive, and jest then force-exits the worker
// with "A worker process has failed to exit gracefully". Our code stops what it starts (a server's close
// ends its intervals), but a library may still hold a one-shot timer: Agenda checks every running job
// for expiry after lockLifetime / 2 (6.5 s) and only then sees that the job ended, so a file whose last
// webhook or mail job ran in its final seconds left such a timer behind. At teardown the file's pending
// timers are cleared; an interval still running is named, since that one is a stop we forgot. So is any
// other resource the file opened and left keeping the event loop alive (a socket, a server, a child
// process): Node's own list of them (process.getActiveResourcesInfo) is compared with the file's start.
const { promisify } = require('node:util');
const { TestEnvironment } = require('jest-environment-node');
// What a worker still holds when jest force-exits it, and (opt-in) the stacks that made it.
const handleTrace = require('./handle-trace.cjs');

class SuiteEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    const pending = new Set();
    this.pendingTimers = pending;
    const global = this.global;
    const { setTimeout: realSetTimeout, setInterval: realSetInterval, clearTimeout: realClearTimeout, clearInterval: realClearInterval } = global;
    global.setTimeout = function setTimeout(callback, ms, ...args) {
      if (typeof callback !== 'function') return realSetTimeout(callback, ms, ...args);
      const timer = realSetTimeout((...a) => { pending.delete(timer); return callback(...a); }, ms, ...args);
      pending.add(timer);
      return timer;
    };
    // util.promisify(setTimeout) keeps working as Node's (a promise after ms).
    global.setTimeout[promisify.custom] = realSetTimeout[promisify.custom];
    global.setInterval = function setInterval(callback, ms, ...args) {
      const timer = realSetInterval(callback, ms, ...args);
      timer.isInterval = true;
      pending.add(timer);
      return timer;
    };
    global.clearTimeout = function clearTimeout(timer) { pending.delete(timer); return realClearTimeout(timer); };
    global.clearInterval = function clearInterval(timer) { pending.delete(timer); return realClearInterval(timer); };
    this.testPath = context.testPath;
    handleTrace.fileStarted(context.testPath);
    this.resourcesAtStart = resourceCounts();
  }

  async teardown() {
    let intervals = 0;
    for (const timer of this.pendingTimers) {
      if (timer && timer.isInterval && typeof timer.hasRef === 'function' && timer.hasRef()) intervals++;
      clearTimeout(timer);
    }
    this.pendingTimers.clear();
    if (intervals > 0) process.stderr.write(`${this.testPath}: ${intervals} interval(s) still running after the file ended (a stop forgot to clear them)\n`);
    await super.teardown();
    // A socket or server being closed goes within a few ticks: what is still there after a second was left open.
    for (let waited = 0; ; waited += 50) {
      const left = leftOpen(this.resourcesAtStart, resourceCounts());
      if (!left) break;
      if (waited >= 1_000) {
        process.stderr.write(`${this.testPath}: left ${left} open after the file ended, keeping its jest worker alive (a close was forgotten)\n`);
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    handleTrace.dump(`after ${this.testPath}`);
  }
}

/** What keeps the event loop alive now, by kind (timers aside: the teardown clears those). */
function resourceCounts() {
  const counts = new Map();
  for (const kind of process.getActiveResourcesInfo()) if (kind !== 'Timeout' && kind !== 'Immediate') counts.set(kind, (counts.get(kind) ?? 0) + 1);
  return counts;
}

/** The kinds there are more of than at the start, as "TCPSocketWrap x2, ProcessWrap x1"; '' when none. */
function leftOpen(before, after) {
  return [...after].filter(([kind, n]) => n > (before.get(kind) ?? 0)).map(([kind, n]) => `${kind} x${n - (before.get(kind) ?? 0)}`).join(', ');
}

module.exports = SuiteEnvironment;
