import { concatHex, getAddress, isAddressEqual, isErc6492Signature, parseErc6492Signature, parseTransaction, type Address, type Hex } from 'viem';
import type { ChainService } from '../../../../chain/chain-service.js';
import { permit2Allowance } from '../../../../chain/permit2.js';
import type { SendTools } from '../../../../settlement/work.js';
import type { SettleOutcome } from '../../../../settlement/settler.js';
import { RelayerUnavailableError, shortReason } from '../../../../settlement/relayer-lane.js';
import type { PaymentDoc } from '../../../models.js';
import { eip2612PermitOfRecord, sendProxySettlement } from '../../permit2-proxy.js';
import { EXACT_PROXY_ADDRESS, type ExactPermit } from './chain.js';
import { exactSettleCalldata, signedTransactionHash, simulateExactSettle } from './permit2-verify.js';
import type { Authorization } from '../../../../chain/usdc.js';
import { permitOfRecord } from './permit2.js';

// Settling an x402 exact payment, on the process that holds a relayer lane: an EIP-3009
// transferWithAuthorization batched with the others of the next block, or the Permit2 proxy's settle.

/** Gas for one settle: Permit2's signature check (ERC-1271 for smart accounts), the token transfer, and an EIP-2612 permit. */
/** The EIP-3009 authorization a record keeps. */
export const authorizationOf = (doc: Pick<PaymentDoc, 'authorization'>): Authorization => ({
  from: getAddress(doc.authorization.from),
  to: getAddress(doc.authorization.to),
  value: BigInt(doc.authorization.value),
  validAfter: BigInt(doc.authorization.validAfter),
  validBefore: BigInt(doc.authorization.validBefore),
  nonce: doc.authorization.nonce as Hex,
});

export const EXACT_PERMIT2_SETTLE_GAS = 250_000n;

/**
 * A transfer with authorization, batched with the others of the next block. ERC-6492 (verify.ts): the
 * record keeps what the buyer signed; a wallet not deployed yet is deployed through its allowed factory
 * first (a factory's deployment is idempotent: a second copy of this work or another payment of the same
 * wallet deploys nothing), and the token checks the inner signature.
 */
export async function sendExactTransfer(chain: ChainService, allowedFactories: readonly string[], payment: PaymentDoc, tools: SendTools): Promise<SettleOutcome> {
  let signature = payment.signature as Hex;
  if (isErc6492Signature(signature)) {
    const { address: factory, data, signature: inner } = parseErc6492Signature(signature);
    const from = getAddress(payment.authorization.from);
    const code = await chain.publicClient.getCode({ address: from });
    if ((!code || code === '0x') && factory && data) {
      if (!allowedFactories.some((a) => isAddressEqual(a as Address, factory))) {
        return { ok: false, reason: 'factory_not_allowed', message: `the factory ${factory} of the wallet ${from} is not allowed` };
      }
      let deployed: boolean;
      try {
        deployed = (await tools.sendTransaction({ to: factory, data }, { paymentId: payment._id, deploy: from })).status === 'success';
      } catch (err) {
        // No relayer here: nothing was sent, another process's relayer may.
        if (err instanceof RelayerUnavailableError) return { ok: false, reason: 'relayer_unavailable', message: err.message, unavailable: true };
        deployed = false;
      }
      const after = await chain.publicClient.getCode({ address: from });
      if (!deployed && (!after || after === '0x')) {
        return { ok: false, reason: 'smart_wallet_deployment_failed', message: `the wallet ${from} could not be deployed through its factory ${factory}` };
      }
    }
    signature = inner;
  }
  return tools.transfer({ authorization: authorizationOf(payment), signature, paymentId: payment._id, ...(payment.dataSuffix ? { dataSuffix: payment.dataSuffix as Hex } : {}) });
}

/** The approval first when the buyer sent one and Permit2 still lacks the allowance, then the proxy's settle from any relayer. */
export async function sendExactPermit2Settlement(chain: ChainService, payment: PaymentDoc, tools: SendTools): Promise<SettleOutcome> {
  const permit = permitOfRecord(payment);
  const signature = payment.signature as Hex;
  const permit2612 = eip2612PermitOfRecord(payment);
  if (payment.erc20Approval) {
    const approved = await sponsorApproval(chain, tools, payment, permit);
    if (approved) return approved;
  }
  return sendProxySettlement(chain, {
    kind: 'exact', owner: permit.from, nonce: permit.nonce, payment,
    // The attribution rides after the call's arguments, which the proxy ignores (ERC-8021).
    tx: { to: EXACT_PROXY_ADDRESS, data: concatHex([exactSettleCalldata(permit, signature, permit2612), (payment.dataSuffix ?? '0x') as Hex]), gas: EXACT_PERMIT2_SETTLE_GAS },
    simulate: () => simulateExactSettle(chain, permit, signature, permit2612),
    submit: (tx) => tools.submit(tx, { scheme: 'exact', assetTransferMethod: 'permit2', paymentIds: [payment._id] }),
  });
}

/**
 * erc20ApprovalGasSponsoring (specs/extensions/erc20_gas_sponsoring.md): the buyer's gas for its signed
 * approve(Permit2) funded when it lacks it (no more than the transaction's own gas limit and fee cap
 * allow), the transaction broadcast and waited for. Undefined when the allowance is there (now, or
 * from a previous run of this work); else the failure, and nothing was settled. Not one atomic bundle
 * (a plain node has none): what can be lost is the funded gas, at most MAX_SPONSORED_APPROVAL_GAS worth.
 */
async function sponsorApproval(chain: ChainService, tools: SendTools, payment: PaymentDoc, permit: ExactPermit): Promise<SettleOutcome | undefined> {
  const approved = async () => (await permit2Allowance(chain.publicClient, chain.usdc.address, permit.from)) >= permit.amount;
  if (await approved()) return undefined;
  const signed = payment.erc20Approval!.signedTransaction as Hex;
  const tx = parseTransaction(signed);
  const cost = tx.gas! * (tx.maxFeePerGas ?? tx.gasPrice ?? 0n);
  const balance = await chain.publicClient.getBalance({ address: permit.from });
  try {
    if (balance < cost) await tools.sendTransaction({ to: permit.from, data: '0x', value: cost - balance, gas: 21_000n }, { scheme: 'exact', sponsor: 'erc20Approval', paymentIds: [payment._id] });
  } catch (err) {
    if (err instanceof RelayerUnavailableError) return { ok: false, reason: 'relayer_unavailable', message: err.message, unavailable: true };
    return { ok: false, reason: 'erc20_approval_broadcast_failed', message: `the buyer's gas for its approval could not be funded: ${shortReason(err)}` };
  }
  // Sent before by an earlier run of this work, the node may say it knows it or its nonce is used: the receipt decides.
  await chain.publicClient.sendRawTransaction({ serializedTransaction: signed }).catch(() => undefined);
  const receipt = await chain.publicClient.waitForTransactionReceipt({ hash: signedTransactionHash(signed), timeout: 30_000, pollingInterval: 250 }).catch(() => undefined);
  if (await approved()) return undefined;
  return { ok: false, reason: receipt ? 'erc20_approval_tx_failed' : 'erc20_approval_broadcast_failed', message: receipt ? `the buyer's approval transaction ${receipt.transactionHash} reverted` : 'the buyer\'s approval transaction was not mined (its nonce used by another, or its fee too low)' };
}
