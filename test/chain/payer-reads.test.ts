import { createPublicClient, createWalletClient, encodeFunctionData, http, keccak256, parseUnits, toHex, type Address } from 'viem';
import { smartAccountFactoryAbi } from '../../server/wallet/smart-account-abi.js';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { PayerReads } from '../../server/chain/payer-reads.js';
import type { ChainService } from '../../server/chain/chain-service.js';
import { MULTICALL3_ADDRESS } from '../../server/dev/chain/deploy.js';
import { authorizationState, balanceOf, submitTransferWithAuthorization } from '../../server/chain/usdc.js';
import { fundedBuyer, randomNonce, setEthBalance, signAuthorization, testChain } from '../support/chain.js';
import { startRpcProxy, type RpcProxy } from '../support/rpc-proxy.js';

let proxy: RpcProxy;
beforeAll(async () => { proxy = await startRpcProxy(testChain().rpcUrl); });
afterAll(async () => { await proxy.close(); });

function chainThrough(url: string): ChainService {
  const { chain, usdc } = testChain();
  return { usdc: { address: usdc }, publicClient: createPublicClient({ chain, transport: http(url, { retryCount: 0 }) }) } as unknown as ChainService;
}

describe('PayerReads: the chain reads of concurrent verifications', () => {
  it('reads the nonce state and balance of many payers at once in one eth_call, each answer its own', async () => {
    const { usdc, publicClient, chain, rpcUrl } = testChain();
    const buyers = await Promise.all([fundedBuyer('1'), fundedBuyer('2'), fundedBuyer('3')]);
    const broke = privateKeyToAccount(generatePrivateKey());
    // One authorization of the first buyer is used on chain.
    const used = await signAuthorization(buyers[0]!, { to: privateKeyToAccount(generatePrivateKey()).address, value: parseUnits('0.5', 6) });
    const relayer = privateKeyToAccount(generatePrivateKey());
    await setEthBalance(relayer.address, parseUnits('1', 18));
    const walletClient = createWalletClient({ chain, transport: http(rpcUrl), account: relayer });
    await submitTransferWithAuthorization({ walletClient, publicClient: publicClient as never, token: usdc, authorization: used.authorization, signature: used.signature });

    const reads = new PayerReads(chainThrough(proxy.url), MULTICALL3_ADDRESS);
    proxy.resetCounts();
    const asks: Array<[Address, `0x${string}`]> = [
      [buyers[0]!.address, used.authorization.nonce], [buyers[0]!.address, randomNonce()],
      [buyers[1]!.address, randomNonce()], [buyers[2]!.address, randomNonce()], [broke.address, randomNonce()],
    ];
    const answers = await Promise.all(asks.map(([payer, nonce]) => reads.read(payer, nonce)));
    expect(proxy.calls()).toBe(1);
    expect(proxy.calls('eth_call')).toBe(1);
    // The same as asking each read alone.
    const client = publicClient as never;
    for (const [i, [payer, nonce]] of asks.entries()) {
      expect(answers[i]).toEqual({
        used: await authorizationState({ client, token: usdc, authorizer: payer, nonce }),
        balance: await balanceOf({ client, token: usdc, account: payer }),
      });
    }
    expect(answers.map((a) => a.used)).toEqual([true, false, false, false, false]);
    expect(answers.map((a) => a.balance)).toEqual([parseUnits('0.5', 6), parseUnits('0.5', 6), parseUnits('2', 6), parseUnits('3', 6), 0n]);
  });

  it('on a chain without Multicall3 at the configured address, reads each payment alone, and answers the same', async () => {
    const buyer = await fundedBuyer('4');
    const fallbacks: string[] = [];
    const reads = new PayerReads(chainThrough(proxy.url), privateKeyToAccount(generatePrivateKey()).address, { onFallback: (reason) => fallbacks.push(reason) });
    const answers = await Promise.all([reads.read(buyer.address, randomNonce()), reads.read(buyer.address, randomNonce())]);
    expect(answers).toEqual([{ used: false, balance: parseUnits('4', 6) }, { used: false, balance: parseUnits('4', 6) }]);
    proxy.resetCounts();
    await reads.read(buyer.address, randomNonce());
    expect(proxy.counts()).toEqual({ eth_call: 2 });
    expect(fallbacks).toEqual([expect.stringMatching(/no Multicall3/)]);
  });

  it('a node that fails fails every read of the batch, as it fails each read alone', async () => {
    const buyer = await fundedBuyer('1');
    const reads = new PayerReads(chainThrough(proxy.url), MULTICALL3_ADDRESS);
    const fault = proxy.httpStatus(502, { method: 'eth_call' });
    try {
      const results = await Promise.allSettled([reads.read(buyer.address, randomNonce()), reads.read(buyer.address, randomNonce())]);
      expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    } finally {
      fault.clear();
    }
    // Still batched afterwards: a node fault is no reason to stop using Multicall3.
    proxy.resetCounts();
    expect(await Promise.all([reads.read(buyer.address, randomNonce()), reads.read(buyer.address, randomNonce())])).toEqual([{ used: false, balance: parseUnits('1', 6) }, { used: false, balance: parseUnits('1', 6) }]);
    expect(proxy.counts()).toEqual({ eth_call: 1 });
  });

  it('asks the payer\'s ERC-1271 answer in the same call: none for an EOA, valid or invalid for a smart account, the same read alone', async () => {
    const { publicClient, chain, rpcUrl, factory } = testChain();
    const owner = privateKeyToAccount(generatePrivateKey());
    await setEthBalance(owner.address, parseUnits('1', 18));
    const salt = randomNonce();
    const wallet = createWalletClient({ chain, transport: http(rpcUrl), account: owner });
    await publicClient.waitForTransactionReceipt({ hash: await wallet.sendTransaction({ to: factory, data: encodeFunctionData({ abi: smartAccountFactoryAbi, functionName: 'createAccount', args: [owner.address, salt] }) }) });
    const account = await publicClient.readContract({ address: factory, abi: smartAccountFactoryAbi, functionName: 'getAddress', args: [owner.address, salt] });
    const digest = keccak256(toHex('a digest'));
    const good = await owner.sign({ hash: digest });
    const bad = await privateKeyToAccount(generatePrivateKey()).sign({ hash: digest });
    const eoa = privateKeyToAccount(generatePrivateKey()).address;
    const asks: Array<[Address, `0x${string}`]> = [[eoa, good], [account, good], [account, bad]];
    const expected = ['none', 'valid', 'invalid'];

    const batched = new PayerReads(chainThrough(proxy.url), MULTICALL3_ADDRESS);
    proxy.resetCounts();
    const answers = await Promise.all(asks.map(([payer, signature]) => batched.read(payer, randomNonce(), { digest, signature })));
    expect(proxy.calls()).toBe(1);
    expect(answers.map((a) => a.erc1271)).toEqual(expected);

    const alone = new PayerReads(chainThrough(proxy.url), privateKeyToAccount(generatePrivateKey()).address);
    const aloneAnswers = await Promise.all(asks.map(([payer, signature]) => alone.read(payer, randomNonce(), { digest, signature })));
    expect(aloneAnswers.map((a) => a.erc1271)).toEqual(expected);
    // Without the check, nothing is asked.
    expect((await batched.read(eoa, randomNonce())).erc1271).toBeUndefined();
  });
});

