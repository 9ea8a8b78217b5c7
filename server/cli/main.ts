import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../platform/config.js';
import { startServer } from '../server.js';
import { runDev } from './dev.js';
import { loginCommand, signupCommand, whoamiCommand, type CommandIO } from './account-commands.js';

const USAGE = `usage: agentgate <command>

  dev                      run the backend on embedded defaults (local database, data in .agentgate/)
  serve                    run the backend from environment configuration (production)
  signup [--url URL]       sign up an agent, unless the saved credentials still work
  login --key KEY --org ORG [--url URL]
                           save an identity key for later commands
  whoami                   show who the saved key belongs to
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
  const { values } = parseArgs({
    args: rest,
    options: { url: { type: 'string' }, key: { type: 'string' }, org: { type: 'string' } },
    allowPositionals: true,
    strict: false,
  }) as { values: { url?: string; key?: string; org?: string } };
  switch (command) {
    case 'dev': {
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
    case 'signup': return signupCommand(io, values);
    case 'login': return loginCommand(io, values);
    case 'whoami': return whoamiCommand(io);
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
