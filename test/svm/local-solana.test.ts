import { createSolanaRpc, generateKeyPairSigner } from '@solana/kit';
import { x402Facilitator } from '@x402/core/facilitator';
import { ExactSvmScheme as ExactSvmClient } from '@x402/svm/exact/client';
import { ExactSvmScheme as ExactSvmFacilitator } from '@x402/svm/exact/facilitator';
import { toFacilitatorSvmSigner } from '@x402/svm';
import { devSolanaSigner, startDevSolana, type DevSolana } from '../../server/dev/solana/dev-solana.js';

// The local Solana as the official SDK uses it: @x402/svm's exact client builds and signs a payment
// against its RPC, and @x402/svm's own facilitator verifies, co-signs, sends and confirms it there.

let chain: DevSolana;

beforeAll(async () => {
  chain = await startDevSolana();
});

afterAll(async () => {
  await chain.stop();
});

const requirements = (payTo: string, feePayer: string, amount = '10000') => ({
  scheme: 'exact', network: chain.network.caip2, asset: chain.usdcMint, amount, payTo, maxTimeoutSeconds: 60, extra: { feePayer },
});

test('the official exact client pays and the official facilitator settles on the local Solana', async () => {
  const buyer = await generateKeyPairSigner();
  const seller = await generateKeyPairSigner();
  await chain.fund(buyer.address, 1_000_000n);
  await chain.fund(seller.address, 0n, 0n);
  const feePayer = await devSolanaSigner('fee-payer');
  chain.ledger.airdrop(feePayer.address, 10_000_000_000n);

  const client = new ExactSvmClient(buyer, { rpcUrl: chain.rpcUrl });
  const accepted = requirements(seller.address, feePayer.address);
  const partial = await client.createPaymentPayload(2, accepted as never);
  const payload = { ...partial, accepted, resource: { url: 'http://shop.test/a', description: '', mimeType: '' } };

  const facilitator = new x402Facilitator().register(chain.network.caip2 as never, new ExactSvmFacilitator(toFacilitatorSvmSigner(feePayer, { defaultRpcUrl: chain.rpcUrl })));
  const verified = await facilitator.verify(payload as never, accepted as never);
  expect(verified).toMatchObject({ isValid: true, payer: buyer.address });
  const settled = await facilitator.settle(payload as never, accepted as never);
  expect(settled).toMatchObject({ success: true, payer: buyer.address, network: chain.network.caip2 });
  expect(await chain.usdcBalance(seller.address)).toBe(10_000n);
  expect(await chain.usdcBalance(buyer.address)).toBe(990_000n);

  // The same transaction again moves nothing: the ledger processes a signature once.
  const rpc = createSolanaRpc(chain.rpcUrl);
  const status = await rpc.getSignatureStatuses([settled.transaction as never]).send();
  expect(status.value[0]).toMatchObject({ confirmationStatus: 'finalized', err: null });
});
