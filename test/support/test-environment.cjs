// The suite's test environment: Node's, plus one rule: a test file's timers end with the file.
//
// A timer a finished file left pending keeps its jest worker alive, and jest then force-exits the worker
// with "A worker process has failed to exit gracefully". Our code stops what it starts (a server's close
// ends its intervals), but a library may still hold a one-shot timer: Agenda checks every running job
// for expiry after lockLifetime / 2 (6.5 s) and only then sees that the job ended, so a file whose last
// webhook or mail job ran in its final seconds left such a timer behind. At teardown the file's pending
// timers are cleared; an interval still running is named, since that one is a stop we forgot.
const { promisify } = require('node:util');
const { TestEnvironment } = require('jest-environment-node');

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
  }
}

module.exports = SuiteEnvironment;
