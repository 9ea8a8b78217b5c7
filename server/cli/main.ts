// Only what every command needs is loaded up front: each command loads its own modules when it runs, so
// `--help` (and a command's usage) answers without loading the server (bin/agentgate.js answers
// `--version` before even this file).
import { PACKAGE } from '../platform/package-info.js';
import { parseArgs } from 'node:util';
import type { CommandIO } from './account-commands.js';

/** Each command's usage: `agentgate <command> --help` prints it and runs nothing. */
const COMMANDS: Record<string, { usage: string; summary: string }> = {
  dev: { usage: 'agentgate dev [--port N] [--quiet]', summary: 'run the backend on embedded defaults (local database, chain, SMTP, chat; data in .agentgate/); prints a line per payment, mail, webhook attempt and chat message unless --quiet' },
  serve: { usage: 'agentgate serve', summary: 'run the backend from environment configuration (production; see docs/operators/configuration.md)' },
  worker: { usage: 'agentgate worker', summary: 'run only the job workers (webhook deliveries, mail), same configuration as serve' },
  signup: { usage: 'agentgate signup [--url URL]', summary: 'sign up an agent, unless the saved credentials still work' },
  login: { usage: 'agentgate login --key KEY --org ORG [--url URL]', summary: 'save an identity key (kept beside the saved platform key of the same org)' },
  whoami: { usage: 'agentgate whoami [--key KEY] [--url URL]', summary: 'show who the key (--key, AGENTGATE_KEY, else the saved one) belongs to' },
  admin: { usage: 'agentgate admin grant <orgId> | revoke <orgId> | list', summary: 'make an org an admin account, or not (team chat is an admin preview)' },
  limits: { usage: 'agentgate limits set <orgId> [--per-key N] [--per-seller-key N] [--per-org N] | clear <orgId> | list', summary: 'an org\'s own request limits per RATE_LIMIT_WINDOW_MS (0: none), in place of the RATE_LIMIT_* defaults' },
  usage: { usage: 'agentgate usage show <orgId> [--month YYYY-MM] [--json] | plan <orgId> <PLAN> | plans', summary: 'an org\'s usage in a month against its plan\'s quotas (USAGE_PLANS), and the plan an org is on' },
  'rotate-master-key': { usage: 'agentgate rotate-master-key', summary: 're-wrap every sealed secret under MASTER_KEY (old keys in MASTER_KEYS_PREVIOUS)' },
  payments: { usage: 'agentgate payments refund <payment id> --reason TEXT [--amount USDC] [--idempotency-key K] [--json] [--key KEY] [--url URL]', summary: 'refund a payment (auth-capture, or exact paid to an agentgate wallet), all that is left or --amount (at most what was paid)' },
  channels: { usage: 'agentgate channels list [--limit N (1-100)] [--cursor C | --all] [--json] [--key KEY] [--url URL]\n       agentgate channels calls <channel id> [--limit N] [--cursor C | --all] [--json] [--key KEY] [--url URL]', summary: 'list the seller\'s batch-settlement channels, and a channel\'s paid calls with the claim transaction of each' },
  domains: { usage: 'agentgate domains list | add <domain> | check <domainId> | rotate-dkim <domainId> | remove <domainId>\n       agentgate domains address <domainId> <localPart> --identity <identityId>   [--json] [--key KEY] [--url URL]', summary: 'the org\'s own mail domains: the DNS records to publish, their check, DKIM rotation, and addresses for identities' },
  receipts: { usage: 'agentgate receipts list [--network NAME] [--limit N (1-100)] [--cursor C | --all] [--json] [--key KEY] [--url URL]\n       agentgate receipts verify <payment id | receipt.json> [--did-document FILE] [--key KEY] [--url URL]', summary: 'list the org\'s payments; check a receipt against the service DID document' },
};

const USAGE = `usage: agentgate <command> [options]

${Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(19)}${c.summary}`).join('\n')}

  agentgate <command> --help   that command's usage      agentgate --version   the version

The backend: --url, else AGENTGATE_URL, else the saved credentials' URL, else the running dev server's,
else http://localhost:3000. Environment: AGENTGATE_KEY (a key instead of the saved one), AGENTGATE_CREDENTIALS (credentials file),
AGENTGATE_STATE_DIR (agentgate dev's data folder, default .agentgate).
`;

const VERSION = PACKAGE.version;

/**
 * Stops gracefully on SIGINT or SIGTERM. One Ctrl-C reaches this process more than once: the terminal
 * sends it to the whole foreground group, and npm (`npm run dev`) and the Node launcher (bin/
 * supported-node.js) each pass theirs on too, all within milliseconds. Only a signal that comes a moment
 * after the first is someone asking again, and that one stops at once.
 */
const SAME_SIGNAL_MS = 1000;

function waitForSignal(stop: () => Promise<void>): void {
  let stoppingSince: number | undefined;
  const handler = () => {
    if (stoppingSince !== undefined) {
      if (Date.now() - stoppingSince >= SAME_SIGNAL_MS) process.exit(1);
      return;
    }
    stoppingSince = Date.now();
    stop().then(() => process.exit(0), (err) => { console.error(err); process.exit(1); });
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
}

export async function runCli(argv: string[], io: CommandIO = { out: (l) => console.log(l), env: process.env }): Promise<number | 'running'> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    io.out(USAGE);
    return 0;
  }
  if (command === '--version' || command === '-v') {
    io.out(VERSION);
    return 0;
  }
  if (!Object.hasOwn(COMMANDS, command)) {
    io.out(`agentgate: unknown command "${command}"\n\n${USAGE}`);
    return 2;
  }
  let parsed;
  try {
    parsed = parseArgs({
      args: rest,
      options: {
        url: { type: 'string' }, key: { type: 'string' }, org: { type: 'string' }, limit: { type: 'string' }, 'did-document': { type: 'string' },
        cursor: { type: 'string' }, all: { type: 'boolean' }, json: { type: 'boolean' }, network: { type: 'string' },
        amount: { type: 'string' }, reason: { type: 'string' }, 'idempotency-key': { type: 'string' },
        'per-key': { type: 'string' }, 'per-seller-key': { type: 'string' }, 'per-org': { type: 'string' },
        month: { type: 'string' }, identity: { type: 'string' }, port: { type: 'string' }, quiet: { type: 'boolean', short: 'q' }, help: { type: 'boolean', short: 'h' },
      },
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    io.out(`agentgate ${command}: ${(err as Error).message}\nusage: ${COMMANDS[command]!.usage}`);
    return 2;
  }
  const { values, positionals } = parsed as { values: { url?: string; key?: string; org?: string; limit?: string; 'did-document'?: string; cursor?: string; all?: boolean; json?: boolean; network?: string; month?: string; identity?: string; port?: string; quiet?: boolean; help?: boolean; amount?: string; reason?: string; 'idempotency-key'?: string }; positionals: string[] };
  // `--help` after a command answers with its usage and never runs it (a signup would create an org).
  if (values.help) {
    io.out(`usage: ${COMMANDS[command]!.usage}\n\n${COMMANDS[command]!.summary}`);
    return 0;
  }
  switch (command) {
    case 'dev': {
      if (values.port !== undefined && !/^\d{1,5}$/.test(values.port)) {
        io.out(`agentgate dev: --port must be a port number, not "${values.port}"`);
        return 2;
      }
      // Loaded only for this command: `serve` and `worker` never load the dev harness (server/dev/).
      const { runDev } = await import('../dev/run-dev.js');
      const dev = await runDev({ ...io.env, ...(values.port ? { PORT: values.port } : {}), ...(values.quiet ? { AGENTGATE_QUIET: '1' } : {}) });
      waitForSignal(dev.stop);
      return 'running';
    }
    case 'serve': {
      const [{ startServer }, { loadConfig }] = await Promise.all([import('../server.js'), import('../platform/config.js')]);
      const server = await startServer(loadConfig(io.env));
      // A JSON line like every other (pid and time come with it), so a log pipeline sees the start too.
      // startedInMs: from the process's start, what a rolling restart waits for on top of the stop.
      server.app.startSteps.mark('listen');
      server.app.log.info({ url: server.url, smtpPort: server.smtpPort, ...(server.metricsUrl ? { metricsUrl: server.metricsUrl } : {}), startedInMs: Math.round(performance.now()), startSteps: server.app.startSteps.steps }, 'listening');
      waitForSignal(server.close);
      return 'running';
    }
    case 'worker': {
      const [{ startWorker }, { loadConfig }] = await Promise.all([import('../server.js'), import('../platform/config.js')]);
      const worker = await startWorker(loadConfig(io.env));
      worker.app.startSteps.mark('metrics');
      worker.app.log.info({ ...(worker.metricsUrl ? { metricsUrl: worker.metricsUrl } : {}), startedInMs: Math.round(performance.now()), startSteps: worker.app.startSteps.steps }, 'worker running');
      waitForSignal(worker.close);
      return 'running';
    }
    case 'rotate-master-key': {
      // Run with the new key as MASTER_KEY / MASTER_KEY_VERSION and the old one in MASTER_KEYS_PREVIOUS.
      const [{ createContext }, { loadConfig }, { rotateMasterKey }] = await Promise.all([import('../context.js'), import('../platform/config.js'), import('./rotate-master-key.js')]);
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
    case 'admin': return (await import('./admin-commands.js')).adminCommand(io, positionals[0], positionals[1]);
    case 'usage': return (await import('./usage-commands.js')).usageCommand(io, positionals[0], positionals.slice(1), values);
    case 'limits': return (await import('./limits-commands.js')).limitsCommand(io, positionals[0], positionals[1], values);
    case 'signup': return (await import('./account-commands.js')).signupCommand(io, values);
    case 'login': return (await import('./account-commands.js')).loginCommand(io, values);
    case 'whoami': return (await import('./account-commands.js')).whoamiCommand(io, values);
    case 'payments':
      if (positionals[0] === 'refund') return (await import('./payment-commands.js')).paymentsRefundCommand(io, positionals[1], values);
      io.out(`usage: ${COMMANDS.payments!.usage}`);
      return 2;
    case 'channels':
      if (positionals[0] === 'list') return (await import('./channel-commands.js')).channelsListCommand(io, values);
      if (positionals[0] === 'calls') return (await import('./channel-commands.js')).channelCallsCommand(io, positionals[1], values);
      io.out(`usage: ${COMMANDS.channels!.usage}`);
      return 2;
    case 'domains':
      return (await import('./domain-commands.js')).domainsCommand(io, positionals[0], positionals.slice(1), values);
    case 'receipts':
      if (positionals[0] === 'list') return (await import('./receipt-commands.js')).receiptsListCommand(io, values);
      if (positionals[0] === 'verify') return (await import('./receipt-commands.js')).receiptsVerifyCommand(io, positionals[1], values);
      io.out(`usage: ${COMMANDS.receipts!.usage}`);
      return 2;
    default:
      io.out(USAGE);
      return 2;
  }
}

runCli(process.argv.slice(2)).then((code) => {
  if (code !== 'running') process.exitCode = code;
}, (err) => {
  // A configuration problem is one clear line, not a stack trace (ConfigError, by name: config.ts is not
  // loaded up front).
  if ((err as Error).name === 'ConfigError') console.error((err as Error).message);
  else console.error(`agentgate: ${(err as Error).message}`);
  process.exit(1);
});
