/**
 * The dev chain's Commerce Payments contracts are where the official @x402/evm auth-capture client expects
 * them, with the published ABI, and compute the payment hashes the client signs. Placed by
 * server/dev/chain/dev-chain.ts: the code `npm run dev` and the suite's shared chain run.
 */
import {
  AUTH_CAPTURE_ESCROW_ADDRESS as SDK_ESCROW,
  EIP3009_TOKEN_COLLECTOR_ADDRESS as SDK_EIP3009_COLLECTOR,
  OPERATOR_REFUND_COLLECTOR_ADDRESS as SDK_REFUND_COLLECTOR,
  PERMIT2_TOKEN_COLLECTOR_ADDRESS as SDK_PERMIT2_COLLECTOR,
  resolveAuthCaptureDeployment,
} from '@x402/evm';
import { formatAbiItem } from 'viem/utils';
import { hexToBigInt, parseAbi, toEventSelector, type Abi, type AbiFunction, type Address } from 'viem';
import { loadArtifacts } from '../../contracts/compile.js';
import {
  AUTH_CAPTURE_ESCROW_ADDRESS,
  EIP3009_TOKEN_COLLECTOR_ADDRESS,
  OPERATOR_REFUND_COLLECTOR_ADDRESS,
  PAYMENT_INFO_TYPEHASH,
  PERMIT2_TOKEN_COLLECTOR_ADDRESS,
  authCaptureEscrowAbi,
  payerAgnosticNonce,
  paymentInfoHash,
  tokenCollectorAbi,
} from '../../server/payments/schemes/auth-capture/evm/chain.js';
import { PERMIT2_ADDRESS } from '../../server/chain/permit2.js';
import { MULTICALL3_ADDRESS } from '../../server/dev/chain/deploy.js';
import { DEV_DEPLOYER } from '../../server/dev/chain/dev-accounts.js';
import { installEscrowContracts } from '../../server/dev/chain/escrow.js';
import { testChain } from '../support/chain.js';
import { authCaptureRequirements, officialPayment, startEscrowChain, type EscrowChain } from './escrow-chain.js';

let chain: EscrowChain;

beforeAll(async () => {
  chain = await startEscrowChain();
});

afterAll(async () => {
  await chain?.stop();
});

const CANONICAL: ReadonlyArray<readonly [string, Address]> = [
  ['AuthCaptureEscrow', AUTH_CAPTURE_ESCROW_ADDRESS],
  ['ERC3009PaymentCollector', EIP3009_TOKEN_COLLECTOR_ADDRESS],
  ['Permit2PaymentCollector', PERMIT2_TOKEN_COLLECTOR_ADDRESS],
  ['OperatorRefundCollector', OPERATOR_REFUND_COLLECTOR_ADDRESS],
];

const signatures = (abi: Abi, type: 'function' | 'event' | 'error') =>
  abi.filter((item) => item.type === type).map((item) => formatAbiItem(item as never)).sort();

describe('addresses', () => {
  it('are the v1.1 deployment the official client signs for by default', () => {
    expect(AUTH_CAPTURE_ESCROW_ADDRESS).toBe(SDK_ESCROW);
    expect(EIP3009_TOKEN_COLLECTOR_ADDRESS).toBe(SDK_EIP3009_COLLECTOR);
    expect(PERMIT2_TOKEN_COLLECTOR_ADDRESS).toBe(SDK_PERMIT2_COLLECTOR);
    expect(OPERATOR_REFUND_COLLECTOR_ADDRESS).toBe(SDK_REFUND_COLLECTOR);
    expect(resolveAuthCaptureDeployment()).toEqual({
      version: 'v1.1',
      escrow: AUTH_CAPTURE_ESCROW_ADDRESS,
      eip3009Collector: EIP3009_TOKEN_COLLECTOR_ADDRESS,
      permit2Collector: PERMIT2_TOKEN_COLLECTOR_ADDRESS,
      operatorRefundCollector: OPERATOR_REFUND_COLLECTOR_ADDRESS,
    });
  });

  it('hold code on the suite\'s shared chain too (global setup starts it with the same code)', async () => {
    const { publicClient } = testChain();
    for (const [, address] of CANONICAL) expect(await publicClient.getCode({ address })).toMatch(/^0x[0-9a-f]{100,}$/);
  });
});

describe('the compiled contracts have the published ABI', () => {
  it('AuthCaptureEscrow: exactly the v1.1 functions and events, and every published error', async () => {
    const { abi } = (await loadArtifacts()).AuthCaptureEscrow;
    expect(signatures(abi, 'function')).toEqual(signatures(authCaptureEscrowAbi, 'function'));
    expect(signatures(abi, 'event')).toEqual(signatures(authCaptureEscrowAbi, 'event'));
    expect(signatures(abi, 'error')).toEqual(expect.arrayContaining(signatures(authCaptureEscrowAbi, 'error')));
    // Outputs too (paymentState is the public mapping's getter: three values, not a struct).
    const outputs = (a: Abi) => Object.fromEntries(a.filter((i): i is AbiFunction => i.type === 'function').map((f) => [f.name, f.outputs.map((o) => o.type)]));
    expect(outputs(abi)).toEqual(outputs(authCaptureEscrowAbi));
  });

  it('events carry the v1.1 topics that commerce-payments documents (feeAmount, not feeBps)', () => {
    // docs/Fees.md in base/commerce-payments, "topic0 values", post-#90 (v1.1) rows.
    const topic = (name: string) => toEventSelector(authCaptureEscrowAbi.find((i) => i.type === 'event' && i.name === name) as never);
    expect(topic('PaymentCharged')).toBe('0x137b0e73e4453f43c2e1ad2552980a0e0c7e988764619974ca26d37a7159940c');
    expect(topic('PaymentCaptured')).toBe('0xac1e0db1957daedbc6944bcb4c8dc947ff8101d710671ac2ec26309f7f38d58e');
  });

  it('the token collectors and the token store', async () => {
    const artifacts = await loadArtifacts();
    const collect = 'function collectTokens((address operator, address payer, address receiver, address token, uint120 maxAmount, uint48 preApprovalExpiry, uint48 authorizationExpiry, uint48 refundExpiry, uint16 minFeeBps, uint16 maxFeeBps, address feeReceiver, uint256 salt) paymentInfo, address tokenStore, uint256 amount, bytes collectorData)';
    const common = ['function authCaptureEscrow() view returns (address)', 'function collectorType() view returns (uint8)', collect];
    const expected = {
      ERC3009PaymentCollector: [...common, 'function multicall3() view returns (address)'],
      Permit2PaymentCollector: [...common, 'function multicall3() view returns (address)', 'function permit2() view returns (address)'],
      OperatorRefundCollector: common,
      TokenStore: ['function authCaptureEscrow() view returns (address)', 'function sendTokens(address token, address recipient, uint256 amount) returns (bool)'],
    } as const;
    for (const [name, functions] of Object.entries(expected)) {
      expect(signatures(artifacts[name as keyof typeof expected].abi, 'function')).toEqual(signatures(parseAbi(functions as readonly string[]), 'function'));
    }
  });
});

describe('on the dev chain', () => {
  it('every contract has code at its address, wired to the canonical escrow, Permit2 and Multicall3', async () => {
    const read = <T>(address: Address, functionName: string) =>
      chain.publicClient.readContract({ address, abi: [...tokenCollectorAbi, ...parseAbi(['function permit2() view returns (address)', 'function multicall3() view returns (address)'])], functionName: functionName as never }) as Promise<T>;
    for (const [, address] of CANONICAL) expect(await chain.publicClient.getCode({ address })).toMatch(/^0x[0-9a-f]{100,}$/);
    for (const collector of [EIP3009_TOKEN_COLLECTOR_ADDRESS, PERMIT2_TOKEN_COLLECTOR_ADDRESS, OPERATOR_REFUND_COLLECTOR_ADDRESS]) {
      expect(await read<Address>(collector, 'authCaptureEscrow')).toBe(AUTH_CAPTURE_ESCROW_ADDRESS);
    }
    expect(await read<number>(EIP3009_TOKEN_COLLECTOR_ADDRESS, 'collectorType')).toBe(0); // Payment
    expect(await read<number>(PERMIT2_TOKEN_COLLECTOR_ADDRESS, 'collectorType')).toBe(0);
    expect(await read<number>(OPERATOR_REFUND_COLLECTOR_ADDRESS, 'collectorType')).toBe(1); // Refund
    expect(await read<Address>(PERMIT2_TOKEN_COLLECTOR_ADDRESS, 'permit2')).toBe(PERMIT2_ADDRESS);
    expect(await read<Address>(EIP3009_TOKEN_COLLECTOR_ADDRESS, 'multicall3')).toBe(MULTICALL3_ADDRESS);
  });

  it('the token store implementation lets the canonical escrow spend, nobody else', async () => {
    const implementation = await chain.publicClient.readContract({ address: AUTH_CAPTURE_ESCROW_ADDRESS, abi: authCaptureEscrowAbi, functionName: 'tokenStoreImplementation' });
    const escrowOfStore = await chain.publicClient.readContract({ address: implementation, abi: tokenCollectorAbi, functionName: 'authCaptureEscrow' });
    expect(escrowOfStore).toBe(AUTH_CAPTURE_ESCROW_ADDRESS);
  });

  it('the escrow hashes a payment as we do, and the client signs our payer-agnostic nonce (both methods)', async () => {
    expect(await chain.publicClient.readContract({ address: AUTH_CAPTURE_ESCROW_ADDRESS, abi: authCaptureEscrowAbi, functionName: 'PAYMENT_INFO_TYPEHASH' })).toBe(PAYMENT_INFO_TYPEHASH);
    const eip3009 = await officialPayment(chain, chain.buyers[0]!, authCaptureRequirements(chain, { maxFeeBps: 250, minFeeBps: 100, feeRecipient: chain.buyers[5]!.address }));
    const onChain = await chain.publicClient.readContract({ address: AUTH_CAPTURE_ESCROW_ADDRESS, abi: authCaptureEscrowAbi, functionName: 'getHash', args: [eip3009.paymentInfo] });
    expect(onChain).toBe(paymentInfoHash(eip3009.paymentInfo, chain.chainId));
    const nonce = payerAgnosticNonce(eip3009.paymentInfo, chain.chainId);
    expect('authorization' in eip3009.payload && eip3009.payload.authorization.nonce).toBe(nonce);
    expect(nonce).not.toBe(onChain); // the payer is part of the payment's identifier, not of the nonce

    const permit2 = await officialPayment(chain, chain.buyers[0]!, authCaptureRequirements(chain, { assetTransferMethod: 'permit2' }));
    expect('permit2Authorization' in permit2.payload && BigInt(permit2.payload.permit2Authorization.nonce)).toBe(hexToBigInt(payerAgnosticNonce(permit2.paymentInfo, chain.chainId)));
  });

  it('placing them again changes nothing, and repairs what is missing', async () => {
    const deployer = DEV_DEPLOYER.address;
    const codes = async () => Promise.all(CANONICAL.map(([, address]) => chain.publicClient.getCode({ address })));
    const before = await codes();
    const nonce = await chain.publicClient.getTransactionCount({ address: deployer });
    await installEscrowContracts({ rpcUrl: chain.rpcUrl, deployerKey: DEV_DEPLOYER.privateKey });
    expect(await chain.publicClient.getTransactionCount({ address: deployer })).toBe(nonce); // nothing deployed
    expect(await codes()).toEqual(before);

    const implementation = await chain.publicClient.readContract({ address: AUTH_CAPTURE_ESCROW_ADDRESS, abi: authCaptureEscrowAbi, functionName: 'tokenStoreImplementation' });
    const storeCode = await chain.publicClient.getCode({ address: implementation });
    for (const address of [PERMIT2_TOKEN_COLLECTOR_ADDRESS, implementation]) {
      await chain.publicClient.request({ method: 'anvil_setCode' as never, params: [address, '0x'] as never });
    }
    await installEscrowContracts({ rpcUrl: chain.rpcUrl, deployerKey: DEV_DEPLOYER.privateKey });
    expect(await codes()).toEqual(before);
    expect(await chain.publicClient.getCode({ address: implementation })).toBe(storeCode);
  });
});
