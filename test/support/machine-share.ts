/**
 * A readers-writer lock over the machine, across jest's workers, for the one kind of test file that must
 * have it to itself: a load test of several OS processes (test/cluster/). On two cores, the rest of the
 * suite running beside it slows both beyond what their timeouts allow, and its figures would mean nothing.
 *
 * Every other test file holds a shared claim while it runs (this module, loaded before each file by jest's
 * setupFilesAfterEnv); a machine-exclusive file announces itself, waits until no shared claim is left,
 * and new files wait while it runs. Claims are files in a folder of this run (global setup names it).
 */
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const folder = process.env.AGENTGATE_TEST_LOCKS;
const WANTED = 'exclusive';
const POLL_MS = 200;
/** A claim left by a worker that crashed must not stop the run for ever. */
const GIVE_UP_MS = 15 * 60_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(check: () => boolean): Promise<void> {
  const deadline = Date.now() + GIVE_UP_MS;
  while (!check() && Date.now() < deadline) await sleep(POLL_MS);
}

/** Waits until no machine-exclusive file runs, then holds a shared claim until `release` is called. */
export async function shareMachine(): Promise<() => void> {
  if (!folder) return () => {};
  mkdirSync(folder, { recursive: true });
  const claim = join(folder, `shared-${process.pid}-${Math.random().toString(36).slice(2)}`);
  for (;;) {
    await until(() => !existsSync(join(folder, WANTED)));
    writeFileSync(claim, '');
    if (!existsSync(join(folder, WANTED))) break;
    rmSync(claim, { force: true }); // an exclusive file announced itself meanwhile: it goes first
  }
  return () => rmSync(claim, { force: true });
}

/** Announces a machine-exclusive file, waits for every shared claim to end, and holds the machine until `release`. */
export async function takeMachine(): Promise<() => void> {
  if (!folder) return () => {};
  mkdirSync(folder, { recursive: true });
  const wanted = join(folder, WANTED);
  // Another exclusive file first, if there is one (a second one would wait its turn).
  await until(() => {
    try {
      writeFileSync(wanted, String(process.pid), { flag: 'wx' });
      return true;
    } catch {
      return false;
    }
  });
  await until(() => readdirSync(folder).every((name) => !name.startsWith('shared-')));
  return () => rmSync(wanted, { force: true });
}

// Loaded before every test file: ordinary files share the machine; a file under test/cluster/ takes it itself.
const testPath = (globalThis as { expect?: { getState(): { testPath?: string } } }).expect?.getState().testPath ?? '';
if (!/[\\/]test[\\/]cluster[\\/]/.test(testPath)) {
  let release = () => {};
  beforeAll(async () => { release = await shareMachine(); }, GIVE_UP_MS + 60_000);
  afterAll(() => release());
}
