// What keeps a jest worker alive at the end of a run, and which code made it.
//
// jest ends a run by asking each worker to exit, and one whose event loop still holds something (a socket,
// a server, a child process, a timer of a client left open) is sent SIGTERM after 500 ms, with "A worker
// process has failed to exit gracefully". The suite's environment (test-environment.cjs) names what each
// file left open, by kind, but not the timers of Node's own modules and of drivers, and not who made them.
// - Always: a worker that jest force-exits says on stderr what it still held (each socket's peer, each
//   server's address, each child's command, the count of timers) and which file ran last.
// - With `AGENTGATE_HANDLE_TRACE=<folder> npm test`: each worker also records the stack that made each
//   socket, server, child, pipe and timer while it lives, and writes those still keeping the loop alive,
//   with the file that made them, to <folder>/<pid>.txt after every file and to <pid>-sigterm.txt when
//   force-exited. It costs a stack per timer; off by default.
const { createHook } = require('node:async_hooks');
const fs = require('node:fs');

const folder = process.env.AGENTGATE_HANDLE_TRACE;
const KINDS = new Set(['Timeout', 'TCPWRAP', 'PIPEWRAP', 'PROCESSWRAP', 'TCPSERVERWRAP', 'UDPWRAP', 'FSEVENTWRAP', 'MESSAGEPORT']);
let alive;
let lastFile;

/** The file whose tests run now: what it makes is labelled with it. */
function fileStarted(testPath) {
  lastFile = testPath;
}

/** Writes to the trace folder what keeps the loop alive now, with the stack and file that made each. */
function dump(when, suffix = '') {
  if (!folder) return;
  const lines = [when, `active: ${process.getActiveResourcesInfo().join(', ')}`];
  for (const [id, made] of alive) {
    const resource = made.resource.deref();
    // A keep-alive socket handed out again is recorded as a ReusedHandle: the socket itself is its own entry.
    if (!resource || resource.constructor?.name === 'ReusedHandle') continue;
    if (typeof resource.hasRef === 'function' && !resource.hasRef()) continue;
    if (made.type === 'Timeout' && (resource._destroyed || resource._idleTimeout === -1)) continue;
    const timer = made.type === 'Timeout' ? ` (${resource._idleTimeout} ms${resource._repeat ? ', repeating' : ''})` : '';
    lines.push(`--- ${made.type}${timer} #${id}, made while ${made.file ?? 'no file'} ran\n${made.stack}`);
  }
  fs.writeFileSync(`${folder}/${process.pid}${suffix}.txt`, `${lines.join('\n')}\n`);
}

/** The handles a worker holds besides jest's own channel and stdio, described so a reader can tell whose they are. */
function heldHandles() {
  // Node's private list: a Node without it gives the count of timers only, never a report cut short.
  if (typeof process._getActiveHandles !== 'function') return [];
  const mine = new Set([process.stdout, process.stderr, process.channel]); // (not process.stdin: reading it would open it)
  return process._getActiveHandles().filter((h) => !mine.has(h) && (typeof h.hasRef !== 'function' || h.hasRef())).map((h) => {
    const kind = h.constructor?.name ?? typeof h;
    if (kind === 'Socket' || kind === 'TLSSocket') return `${kind} to ${h.remoteAddress ?? '?'}:${h.remotePort ?? '?'}`;
    if (kind === 'Server' && typeof h.address === 'function') return `Server on ${JSON.stringify(h.address())}`;
    if (kind === 'ChildProcess') return `ChildProcess ${[h.spawnfile, ...(h.spawnargs ?? []).slice(1, 4)].join(' ')}`;
    return kind;
  });
}

if (!globalThis.__agentgateHandleTrace) {
  globalThis.__agentgateHandleTrace = true;
  if (folder) {
    alive = new Map();
    createHook({
      init(id, type, _trigger, resource) {
        if (KINDS.has(type)) alive.set(id, { type, stack: new Error().stack.split('\n').slice(2, 14).join('\n'), resource: new WeakRef(resource), file: lastFile });
      },
      destroy(id) { alive.delete(id); },
    }).enable();
    fs.mkdirSync(folder, { recursive: true });
  }
  // In a worker only (a forked child, with its IPC channel): a SIGTERM to a run in band is someone else's.
  if (typeof process.send === 'function') process.once('SIGTERM', () => {
    const timers = process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
    process.stderr.write(`jest force-exited worker ${process.pid} (last file: ${lastFile ?? 'none'}), which still held: ${[...heldHandles(), `${timers} timer(s)`].join(', ')}${folder ? `; stacks in ${folder}/${process.pid}-sigterm.txt` : '; AGENTGATE_HANDLE_TRACE=<folder> records the stacks that made them'}\n`);
    dump('jest force-exited this worker', '-sigterm');
    process.exit(1);
  });
}

module.exports = { fileStarted, dump };
