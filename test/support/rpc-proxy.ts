// A fault-injecting JSON-RPC proxy for tests: a real HTTP server on 127.0.0.1 in front of a real node
// (anvil), so the code under test meets the failures of a real RPC provider (timeouts, refused and reset
// connections, 5xx from a load balancer, JSON-RPC errors, a node that took a transaction and then failed
// to answer) through its real HTTP stack, with nothing mocked in between.
//
//   const proxy = await startRpcProxy(testChain().rpcUrl);
//   proxy.hang({ method: 'eth_blockNumber', times: 1 });        // the next eth_blockNumber never answers
//   proxy.afterForward.refuse({ method: 'eth_sendRawTransaction' }); // the node takes it, the client sees a reset
//   proxy.calls('eth_sendRawTransaction');                        // how many this proxy saw
//   await proxy.down(); await proxy.up();                         // connections refused meanwhile
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';

/** Which calls a fault applies to: one method, several, or every method (the default); `times` limits it to the next N matching calls. */
export interface FaultTarget {
  method?: string | readonly string[];
  times?: number;
}

export interface JsonRpcErrorObject {
  code: number;
  message: string;
  data?: unknown;
}

export interface HttpAnswer {
  status: number;
  body?: string;
  headers?: Record<string, string>;
}

/** A fault once injected: how often it struck, and a way to lift it early. */
export interface FaultHandle {
  readonly hits: number;
  clear(): void;
}

type FaultKind =
  | { kind: 'delay'; ms: number }
  | { kind: 'hang' }
  | { kind: 'refuse' }
  | { kind: 'http'; answer: HttpAnswer }
  | { kind: 'rpcError'; error: JsonRpcErrorObject };

interface Fault {
  kind: FaultKind;
  afterForward: boolean;
  methods: readonly string[] | undefined;
  remaining: number;
  hits: number;
}

/** Faults that strike after the node has taken the call: it did the work, the client never learns the result. */
export interface AfterForwardFaults {
  hang(target?: FaultTarget): FaultHandle;
  refuse(target?: FaultTarget): FaultHandle;
  httpStatus(answer: number | HttpAnswer, target?: FaultTarget): FaultHandle;
  rpcError(error: JsonRpcErrorObject, target?: FaultTarget): FaultHandle;
}

export interface RpcProxy {
  /** http://127.0.0.1:<port>; the same across down() and up(). */
  readonly url: string;
  /** Answers late: waits `ms`, then forwards (a call whose client gave up meanwhile still reaches the node, as on a slow network). */
  delay(ms: number, target?: FaultTarget): FaultHandle;
  /** Never answers (the connection stays open until the client gives up, or down()/close()). Nothing is forwarded. */
  hang(target?: FaultTarget): FaultHandle;
  /** Destroys the connection without an answer. Nothing is forwarded. */
  refuse(target?: FaultTarget): FaultHandle;
  /** Answers with this HTTP status (default body: a plain-text line, as a load balancer would). Nothing is forwarded. */
  httpStatus(answer: number | HttpAnswer, target?: FaultTarget): FaultHandle;
  /** Answers the call with this JSON-RPC error object (HTTP 200). Nothing is forwarded. */
  rpcError(error: JsonRpcErrorObject, target?: FaultTarget): FaultHandle;
  /** The same faults, struck after the call was forwarded and the node answered: the ambiguous send. */
  readonly afterForward: AfterForwardFaults;
  /** Calls this proxy received (each element of a batch counts), for one method or all. */
  calls(method?: string): number;
  /** Calls this proxy passed on to the node, for one method or all. */
  forwarded(method?: string): number;
  /** Calls `listener` each time the node has answered a call of `method`, before the answer goes back (a node's side effects, timed). */
  onAnswered(method: string, listener: () => void): void;
  /** Received calls by method. */
  counts(): Record<string, number>;
  resetCounts(): void;
  clearFaults(): void;
  /** Closes the listener and drops every open connection: new connections are refused until up(). */
  down(): Promise<void>;
  /** Listens again on the same port. */
  up(): Promise<void>;
  close(): Promise<void>;
}

interface RpcCall {
  id?: unknown;
  method?: unknown;
}

const METHOD_OF_UNPARSABLE = '<unparsable>';

export async function startRpcProxy(upstreamUrl: string): Promise<RpcProxy> {
  const faults: Fault[] = [];
  const received = new Map<string, number>();
  const passedOn = new Map<string, number>();
  const answered = new Map<string, Array<() => void>>();
  let server: Server | undefined;
  let port = 0;

  const count = (map: Map<string, number>, method: string) => map.set(method, (map.get(method) ?? 0) + 1);
  const sum = (map: Map<string, number>, method?: string) =>
    method === undefined ? [...map.values()].reduce((a, b) => a + b, 0) : (map.get(method) ?? 0);

  const inject = (kind: FaultKind, afterForward: boolean, target: FaultTarget = {}): FaultHandle => {
    const methods = target.method === undefined ? undefined : typeof target.method === 'string' ? [target.method] : target.method;
    const fault: Fault = { kind, afterForward, methods, remaining: target.times ?? Infinity, hits: 0 };
    faults.push(fault);
    return {
      get hits() { return fault.hits; },
      clear: () => { fault.remaining = 0; },
    };
  };

  // The first live fault for this method, used up by one call.
  const take = (method: string): Fault | undefined => {
    const fault = faults.find((f) => f.remaining > 0 && (f.methods === undefined || f.methods.includes(method)));
    if (fault) {
      fault.remaining--;
      fault.hits++;
    }
    return fault;
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readBody(req);
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.toString('utf8'));
    } catch {
      parsed = undefined;
    }
    const isBatch = Array.isArray(parsed);
    const calls: RpcCall[] = isBatch ? (parsed as RpcCall[]) : [(parsed ?? {}) as RpcCall];
    const methodOf = (call: RpcCall) => (typeof call?.method === 'string' ? call.method : METHOD_OF_UNPARSABLE);
    for (const call of calls) count(received, methodOf(call));
    const struck = calls.map((call) => take(methodOf(call)));

    // A batch travels in one HTTP exchange: the longest delay delays all of it, and the first
    // connection-level fault (hang, refuse, HTTP status) strikes all of it; JSON-RPC errors are per call.
    const delayMs = Math.max(0, ...struck.map((f) => (f?.kind.kind === 'delay' ? f.kind.ms : 0)));
    if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
    const connectionFault = (afterForward: boolean) =>
      struck.find((f) => f !== undefined && f.afterForward === afterForward && f.kind.kind !== 'delay' && f.kind.kind !== 'rpcError');
    if (strikeConnection(connectionFault(false), req, res)) return;

    const toForward = calls.filter((_, i) => !(struck[i]?.kind.kind === 'rpcError' && !struck[i]!.afterForward));
    let upstream: { status: number; answers: Map<unknown, unknown>; raw?: string } = { status: 200, answers: new Map() };
    if (toForward.length > 0) {
      for (const call of toForward) count(passedOn, methodOf(call));
      const forwardBody = parsed === undefined || toForward.length === calls.length ? body : JSON.stringify(isBatch ? toForward : toForward[0]);
      try {
        const answer = await fetch(upstreamUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: forwardBody });
        const text = await answer.text();
        upstream = { status: answer.status, answers: answersById(text), raw: text };
      } catch (err) {
        // The node itself is gone: answer as a gateway would.
        if (!res.destroyed) res.writeHead(502, { 'content-type': 'text/plain' }).end(`rpc-proxy: upstream unreachable: ${(err as Error).message}`);
        return;
      }
    }
    for (const call of toForward) for (const listener of answered.get(methodOf(call)) ?? []) listener();
    if (strikeConnection(connectionFault(true), req, res)) return;

    const rpcErrorAt = (i: number) => (struck[i]?.kind.kind === 'rpcError' ? (struck[i]!.kind as { error: JsonRpcErrorObject }).error : undefined);
    if (!struck.some((_, i) => rpcErrorAt(i)) && upstream.raw !== undefined) {
      // Untouched: pass the node's answer through byte for byte.
      if (!res.destroyed) res.writeHead(upstream.status, { 'content-type': 'application/json' }).end(upstream.raw);
      return;
    }
    const answers = calls.map((call, i) => {
      const error = rpcErrorAt(i);
      return error ? { jsonrpc: '2.0', id: call?.id ?? null, error } : upstream.answers.get(call?.id);
    });
    if (!res.destroyed) res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(isBatch ? answers : answers[0]));
  }

  async function listen(): Promise<void> {
    const next = createServer((req, res) => {
      // One exchange per connection: a client then never holds a kept-alive connection to a proxy that
      // went down() (it would see a reset on reuse instead of the refused connection a gone node gives).
      res.setHeader('connection', 'close');
      handle(req, res).catch((err: Error) => {
        if (!res.headersSent && !res.destroyed) res.writeHead(500, { 'content-type': 'text/plain' }).end(`rpc-proxy: ${err.message}`);
      });
    });
    next.listen(port, '127.0.0.1');
    await once(next, 'listening');
    port = (next.address() as AddressInfo).port;
    server = next;
  }

  async function stop(): Promise<void> {
    const current = server;
    server = undefined;
    if (!current) return;
    const closed = new Promise<void>((resolve) => current.close(() => resolve()));
    // Hung exchanges and idle keep-alive connections would hold close() open, and a client on a kept-alive
    // connection would still reach a proxy that is "down".
    current.closeAllConnections();
    await closed;
  }

  await listen();
  const afterForward: AfterForwardFaults = {
    hang: (target) => inject({ kind: 'hang' }, true, target),
    refuse: (target) => inject({ kind: 'refuse' }, true, target),
    httpStatus: (answer, target) => inject({ kind: 'http', answer: httpAnswer(answer) }, true, target),
    rpcError: (error, target) => inject({ kind: 'rpcError', error }, true, target),
  };
  return {
    url: `http://127.0.0.1:${port}`,
    delay: (ms, target) => inject({ kind: 'delay', ms }, false, target),
    hang: (target) => inject({ kind: 'hang' }, false, target),
    refuse: (target) => inject({ kind: 'refuse' }, false, target),
    httpStatus: (answer, target) => inject({ kind: 'http', answer: httpAnswer(answer) }, false, target),
    rpcError: (error, target) => inject({ kind: 'rpcError', error }, false, target),
    afterForward,
    calls: (method) => sum(received, method),
    forwarded: (method) => sum(passedOn, method),
    onAnswered: (method, listener) => { answered.set(method, [...(answered.get(method) ?? []), listener]); },
    counts: () => Object.fromEntries(received),
    resetCounts: () => { received.clear(); passedOn.clear(); },
    clearFaults: () => { faults.length = 0; },
    down: stop,
    up: async () => { if (!server) await listen(); },
    close: async () => { faults.length = 0; await stop(); },
  };
}

/** Applies a hang, refuse or HTTP-status fault; true when the exchange is thereby done (or left hanging). */
function strikeConnection(fault: Fault | undefined, req: IncomingMessage, res: ServerResponse): boolean {
  if (!fault) return false;
  switch (fault.kind.kind) {
    case 'hang':
      return true;
    case 'refuse':
      req.socket.destroy();
      return true;
    case 'http': {
      const { status, body, headers } = fault.kind.answer;
      if (!res.destroyed) res.writeHead(status, { 'content-type': 'text/plain', ...headers }).end(body ?? `rpc-proxy: HTTP ${status}`);
      return true;
    }
    default:
      return false;
  }
}

function httpAnswer(answer: number | HttpAnswer): HttpAnswer {
  return typeof answer === 'number' ? { status: answer } : answer;
}

function answersById(text: string): Map<unknown, unknown> {
  const answers = new Map<unknown, unknown>();
  try {
    const parsed: unknown = JSON.parse(text);
    for (const answer of Array.isArray(parsed) ? parsed : [parsed]) answers.set((answer as { id?: unknown })?.id, answer);
  } catch {
    // Not JSON: no per-call answers to merge (the caller then sends what it has).
  }
  return answers;
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}
