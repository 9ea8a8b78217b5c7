import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../platform/config.js';
import { startServer, startWorker } from '../server.js';
import { loginCommand, signupCommand, whoamiCommand, type CommandIO } from './account-commands.js';
import { receiptsListCommand, receiptsVerifyCommand } from './receipt-commands.js';
import { rotateMasterKey } from './rotate-master-key.js';
import { adminCommand } from './admin-commands.js';
import { createContext } from '../context.js';

const USAGE = `usage: agentgate <command>

  dev                      run the backend on embedded defaults (local database, data in .agentgate/)
  serve                    run the backend from environment configuration (production)
  worker                   run only the job workers (webhook deliveries, mail), same configuration as serve
  signup [--url URL]       sign up an agent, unless the saved credentials still work
  login --key KEY --org ORG [--url URL]
                           save an identity key for later commands
  whoami                   show who the saved key belongs to
  admin grant|revoke <orgId>, admin list
                           make an org an admin account, or not (team chat is an admin preview)
  rotate-master-key        re-wrap every sealed secret under MASTER_KEY (old keys in MASTER_KEYS_PREVIOUS)
  receipts list [--limit N] [--key KEY] [--url URL]
                           list the org's payments (platform or seller key)
  receipts verify <payment id | receipt.json> [--did-document FILE]
                           check a receipt's Ed25519 signature against the service DID
`;

function waitForSignal(stop: () => Promise<void>): void {
  let stopping = false;
  const handler = () => {
    if (stopping) process.exit(1);
    stopping = true;
    stop().then(() => process.exit(0), (err) => { console.error(err); process.exit(1); });
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
}

export async function runCli(argv: string[], io: CommandIO = { out: (l) => console.log(l), env: process.env }): Promise<number | 'running'> {
  const [command, ...rest] = argv;
  const { values, positionals } = parseArgs({
    args: rest,
    options: { url: { type: 'string' }, key: { type: 'string' }, org: { type: 'string' }, limit: { type: 'string' }, 'did-document': { type: 'string' } },
    allowPositionals: true,
    strict: false,
  }) as { values: { url?: string; key?: string; org?: string; limit?: string; 'did-document'?: string }; positionals: string[] };
  switch (command) {
    case 'dev': {
      // Loaded only for this command: `serve` and `worker` never load the dev harness (server/dev/).
      const { runDev } = await import('../dev/run-dev.js');
      const dev = await runDev(io.env);
      waitForSignal(dev.stop);
      return 'running';
    }
    case 'serve': {
      const server = await startServer(loadConfig(io.env));
      io.out(`[agentgate] listening on ${server.url}`);
      waitForSignal(server.close);
      return 'running';
    }
    case 'worker': {
      const worker = await startWorker(loadConfig(io.env));
      io.out('[agentgate] worker running');
      waitForSignal(worker.close);
      return 'running';
    }
    case 'rotate-master-key': {
      // Run with the new key as MASTER_KEY / MASTER_KEY_VERSION and the old one in MASTER_KEYS_PREVIOUS.
      const app = await createContext(loadConfig(io.env));
      try {
        const report = await rotateMasterKey(app);
        io.out(JSON.stringify(report, null, 2));
        io.out(report.remaining === 0
          ? `every sealed value is now wrapped by master key version ${report.currentVersion}; older keys can be retired`
          : `${report.remaining} sealed values are still wrapped by an older key: run again before retiring it`);
        return report.remaining === 0 ? 0 : 1;
      } finally {
        await app.close();
      }
    }
    case 'admin': return adminCommand(io, positionals[0], positionals[1]);
    case 'signup': return signupCommand(io, values);
    case 'login': return loginCommand(io, values);
    case 'whoami': return whoamiCommand(io);
    case 'receipts':
      if (positionals[0] === 'list') return receiptsListCommand(io, values);
      if (positionals[0] === 'verify') return receiptsVerifyCommand(io, positionals[1], values);
      io.out(USAGE);
      return 2;
    default:
      io.out(USAGE);
      return command ? 2 : 0;
  }
}

runCli(process.argv.slice(2)).then((code) => {
  if (code !== 'running') process.exitCode = code;
}, (err) => {
  // A configuration problem is one clear line, not a stack trace.
  if (err instanceof ConfigError) console.error(err.message);
  else console.error(`agentgate: ${(err as Error).message}`);
  process.exit(1);
});
