import { createServer, connect } from 'node:net';

/**
 * Ports handed out for a server to listen on later. They are drawn below the kernel's ephemeral range
 * (Linux: 32768-60999), from which every `listen(0)` (anvil's `--port 0`) and every outgoing connection
 * takes its port: a port the OS chose for us there could be taken by one of those before our server binds
 * it. Here only another caller of freePort can collide, and each candidate is checked by binding it.
 * `avoid`: ports that are free now but promised to a server that binds later (configured ports).
 */
const RANGE = { from: 20_000, to: 32_000 };

export async function freePort(avoid: Iterable<number> = []): Promise<number> {
  const promised = new Set(avoid);
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = RANGE.from + Math.floor(Math.random() * (RANGE.to - RANGE.from));
    if (!promised.has(port) && (await canBind(port))) return port;
  }
  throw new Error(`no free port found between ${RANGE.from} and ${RANGE.to}`);
}

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** Resolves once something accepts TCP connections on host:port. */
export async function waitForTcp(host: string, port: number, timeoutMs: number, gaveUp: () => boolean = () => false): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect({ host, port });
      socket.once('connect', () => { socket.destroy(); resolve(true); });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    if (gaveUp()) throw new Error('process exited before it listened');
    if (Date.now() > deadline) throw new Error(`nothing listened on ${host}:${port} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
