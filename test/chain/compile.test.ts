import { appendFile, cp, mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { toFunctionSelector } from 'viem';
import { CONTRACT_NAMES, loadArtifacts } from '../../contracts/compile.js';

const contractsDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../contracts');

describe('loadArtifacts', () => {
  it('returns ABI and creation bytecode for SmartAccount, its factory, and the dev chain\'s Permit2, upto proxy, escrow and its collectors, batch-settlement contracts and sanctions oracle (USDC is Circle\'s, not compiled here)', async () => {
    const artifacts = await loadArtifacts();
    expect(Object.keys(artifacts).sort()).toEqual([
      'AuthCaptureEscrow', 'ERC3009DepositCollector', 'ERC3009PaymentCollector', 'OperatorRefundCollector', 'Permit2', 'Permit2DepositCollector',
      'Permit2PaymentCollector', 'SanctionsOracle', 'SmartAccount', 'SmartAccountFactory', 'TokenStore', 'X402BatchSettlement', 'X402ExactPermit2Proxy', 'X402UptoPermit2Proxy',
    ]);
    for (const name of CONTRACT_NAMES) expect(artifacts[name].bytecode).toMatch(/^0x[0-9a-f]{200,}$/);
    const selectors = (name: (typeof CONTRACT_NAMES)[number]) =>
      artifacts[name].abi.flatMap((item) => (item.type === 'function' ? [toFunctionSelector(item)] : []));
    expect(selectors('SmartAccount')).toEqual(
      expect.arrayContaining([toFunctionSelector('isValidSignature(bytes32,bytes)'), toFunctionSelector('execute(address,uint256,bytes)')]),
    );
    expect(selectors('SmartAccountFactory')).toEqual(
      expect.arrayContaining([toFunctionSelector('createAccount(address,bytes32)'), toFunctionSelector('getAddress(address,bytes32)')]),
    );
  });

  it('compiles once per source set: a copy of the same sources hits the cache, an edit compiles anew', async () => {
    const work = await mkdtemp(path.join(tmpdir(), 'agentgate-compile-'));
    const cacheDir = path.join(work, 'cache');
    try {
      const copyA = path.join(work, 'a');
      const copyB = path.join(work, 'b');
      await cp(contractsDir, copyA, { recursive: true, filter: (src) => !src.endsWith('.ts') });
      await cp(contractsDir, copyB, { recursive: true, filter: (src) => !src.endsWith('.ts') });

      const compiled = await loadArtifacts({ contractsDir: copyA, cacheDir });
      const cacheFiles = (await readdir(cacheDir)).filter((f) => f.endsWith('.json'));
      expect(cacheFiles).toHaveLength(1);

      const written = (await stat(path.join(cacheDir, cacheFiles[0]!))).mtimeMs;
      const cached = await loadArtifacts({ contractsDir: copyB, cacheDir });
      expect(cached).toEqual(compiled);
      // A hit reads the cache file; a compile would have written it again.
      expect((await stat(path.join(cacheDir, cacheFiles[0]!))).mtimeMs).toBe(written);
      expect(await readdir(cacheDir)).toEqual(cacheFiles); // no temp files left behind

      await appendFile(path.join(copyB, 'SmartAccount.sol'), '\n// edited\n');
      const copyC = path.join(work, 'c');
      await cp(copyB, copyC, { recursive: true });
      await loadArtifacts({ contractsDir: copyC, cacheDir });
      expect((await readdir(cacheDir)).filter((f) => f.endsWith('.json'))).toHaveLength(2);
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }, 180_000); // two solc-js compiles of every contract, on a shared machine
});
