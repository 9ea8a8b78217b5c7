import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

// The scheme layout, checked by lint and held by the suite (test/architecture.test.ts): every scheme
// has one folder per side, for each chain family, with the same file names, and is called by one word.
// A newcomer who knows where exact's verify is knows where upto's is.

export const SCHEMES = ['exact', 'upto', 'auth-capture', 'batch-settlement'] as const;
/** Chain families a scheme folder may hold. A scheme need not exist on every family (auth-capture and
 * batch-settlement stand on EVM contracts), but a family it has is there on every side. */
export const FAMILIES = ['evm', 'svm'] as const;

/** Each side of a scheme: where its folders are, and the files every scheme has there. */
export const SIDES = [
  { side: 'wire', dir: 'packages/x402-wire/src/schemes', files: ['wire.ts', 'challenge.ts', 'reasons.ts'] },
  { side: 'seller', dir: 'middleware/schemes', files: ['seller.ts'] },
  { side: 'facilitator', dir: 'server/payments/schemes', files: ['scheme.ts', 'verify.ts', 'settle.ts', 'facilitator.ts', 'chain.ts'] },
  { side: 'buyer', dir: 'server/buyer/schemes', files: ['payer.ts'] },
] as const;

/** The chain families a scheme has on any side (evm at least: every scheme starts there). */
function familiesOf(root: string, scheme: string): string[] {
  const found = new Set<string>(['evm']);
  for (const { dir } of SIDES) {
    const base = join(root, dir, scheme);
    if (!existsSync(base)) continue;
    for (const name of readdirSync(base)) if ((FAMILIES as readonly string[]).includes(name)) found.add(name);
  }
  return [...found];
}

/** Missing scheme folders or files, and scheme folders that are not a scheme. */
export function schemeLayoutProblems(root: string): string[] {
  const problems: string[] = [];
  for (const { side, dir, files } of SIDES) {
    const base = join(root, dir);
    const folders = existsSync(base) ? readdirSync(base).filter((name) => statSync(join(base, name)).isDirectory()) : [];
    for (const folder of folders) {
      if (!(SCHEMES as readonly string[]).includes(folder)) problems.push(`${dir}/${folder}: not a scheme (${SCHEMES.join(', ')}); name it by its x402 scheme`);
    }
    for (const scheme of SCHEMES) {
      for (const family of familiesOf(root, scheme)) {
        for (const file of files) {
          if (!existsSync(join(base, scheme, family, file))) problems.push(`${dir}/${scheme}/${family}/${file} is missing: every scheme's ${side} side has ${files.join(', ')}`);
        }
      }
    }
  }
  return problems;
}

/**
 * A scheme's role named by a word other than the scheme's own: "channel" for batch-settlement and
 * "escrow" for auth-capture name things inside those schemes (a channel, the escrow contract), never the
 * scheme (ChannelScheme, EscrowFacilitator, channelPayer...).
 */
const DRIFTING = /\b[A-Za-z]*(?:Channel|Escrow|channel|escrow)(?:Scheme|Facilitator|Payer|Seller|Settler|Verifier|Operations|Refunds|Requirements?|Payload|PaymentHeader|Reasons?|Offer|Kind|Wire|Challenge)\b/g;
const SOURCE_DIRS = ['packages/x402-wire/src', 'middleware', 'adapters', 'server', 'examples', 'bench'];

/** Identifiers that name a scheme by a drifting word, as `file: identifier`. */
export function driftingSchemeNames(root: string, dirs: readonly string[] = SOURCE_DIRS): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    if (!existsSync(dir)) return;
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (name === 'node_modules' || name === 'dist') continue;
      if (statSync(path).isDirectory()) walk(path);
      else if (/\.(ts|tsx|mjs)$/.test(name) && !name.endsWith('.d.ts')) {
        for (const match of readFileSync(path, 'utf8').matchAll(DRIFTING)) found.push(`${path.slice(root.length + 1)}: ${match[0]}`);
      }
    }
  };
  for (const dir of dirs) walk(join(root, dir));
  return found;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
  const problems = [...schemeLayoutProblems(root), ...driftingSchemeNames(root).map((name) => `${name}: call a scheme by its x402 name`)];
  for (const problem of problems) console.error(`schemes: ${problem}`);
  console.log(`schemes: ${SCHEMES.length} schemes x ${SIDES.length} sides checked, ${problems.length} problems`);
  process.exitCode = problems.length ? 1 : 0;
}
