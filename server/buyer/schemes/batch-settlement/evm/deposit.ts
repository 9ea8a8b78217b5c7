import { randomBytes } from 'node:crypto';
import { getAddress, toHex, type Address, type Hex } from 'viem';
import { authorizationState, type Authorization } from '../../../../chain/usdc.js';
import { erc3009DepositNonce, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS, type ChannelDepositPermit } from '../../../../payments/schemes/batch-settlement/evm/chain.js';
import type { WalletService } from '../../../../wallet/wallet-service.js';
import type { WalletDoc } from '../../../../wallet/wallet-model.js';

// A channel deposit's signed authorization, as a batch-settlement `deposit` payload carries it
// (specs/schemes/batch-settlement/scheme_batch_settlement_evm.md; the field names of @x402/evm's client):
// an ERC-3009 ReceiveWithAuthorization to the EIP-3009 deposit collector (the default), or, when the seller
// asks `extra.assetTransferMethod: "permit2"`, a Permit2 PermitWitnessTransferFrom to the Permit2 deposit
// collector with the witness DepositWitness(channelId). Either moves the wallet's USDC into that channel
// only (its config names the wallet as payer), never to the seller directly.

/** A deposit authorization lives no longer than this (nor longer than the offer's maxTimeoutSeconds). */
export const MAX_DEPOSIT_VALIDITY_SECONDS = 300;

export interface DepositTerms {
  method: 'eip3009' | 'permit2';
  channelId: Hex;
  amount: bigint;
  /** The offer's maxTimeoutSeconds: the authorization expires sooner than the seller's timeout, and within 300 s. */
  maxTimeoutSeconds: number;
}

export interface SignedDeposit {
  /** `deposit.authorization` of the payload. */
  authorization: Record<string, unknown>;
  /** After a refusal: makes sure the authorization can never move the money later (when it was not used). */
  revokeIfUnused(): Promise<void>;
}

/** Signs the deposit by the seller's method (Permit2 first gives the wallet's Permit2 allowance if it has none). */
export function signChannelDeposit(wallets: WalletService, wallet: WalletDoc, terms: DepositTerms): Promise<SignedDeposit> {
  return terms.method === 'permit2' ? signPermit2Deposit(wallets, wallet, terms) : signErc3009Deposit(wallets, wallet, terms);
}

const expiryOf = (terms: DepositTerms) => BigInt(Math.floor(Date.now() / 1000) + Math.min(MAX_DEPOSIT_VALIDITY_SECONDS, terms.maxTimeoutSeconds));

/** ERC-3009: the collector derives the token nonce from the channel and a random salt. */
async function signErc3009Deposit(wallets: WalletService, wallet: WalletDoc, terms: DepositTerms): Promise<SignedDeposit> {
  const salt = toHex(randomBytes(32));
  const nonce = erc3009DepositNonce(terms.channelId, BigInt(salt));
  const validBefore = expiryOf(terms);
  const authorization: Authorization = { from: getAddress(wallet.address), to: ERC3009_DEPOSIT_COLLECTOR_ADDRESS, value: terms.amount, validAfter: 0n, validBefore, nonce };
  const signature = await wallets.signReceiveAuthorization(wallet, authorization);
  return {
    authorization: { erc3009Authorization: { validAfter: '0', validBefore: validBefore.toString(), salt, signature } },
    // A deposit that did not go through can never go through later: USDC's cancelAuthorization (relayer-sent).
    revokeIfUnused: async () => {
      const chain = wallets.requireChain();
      const used = await authorizationState({ client: chain.publicClient, token: chain.usdc.address, authorizer: wallet.address as Address, nonce }).catch(() => false);
      if (!used) await wallets.cancelAuthorization(wallet, nonce);
    },
  };
}

/**
 * Permit2: the wallet's one-time Permit2 approval (relayer-sent, covering any amount) if it has none, then
 * the permit for exactly the deposit, with a random unordered nonce.
 */
async function signPermit2Deposit(wallets: WalletService, wallet: WalletDoc, terms: DepositTerms): Promise<SignedDeposit> {
  const chain = wallets.requireChain();
  await wallets.ensurePermit2Allowance(wallet, terms.amount);
  const permit: ChannelDepositPermit = {
    from: getAddress(wallet.address), token: chain.usdc.address, amount: terms.amount, spender: PERMIT2_DEPOSIT_COLLECTOR_ADDRESS,
    nonce: BigInt(toHex(randomBytes(32))), deadline: expiryOf(terms), channelId: terms.channelId,
  };
  const signature = await wallets.signChannelDepositPermit(wallet, permit);
  return {
    authorization: {
      permit2Authorization: {
        from: permit.from, permitted: { token: permit.token, amount: permit.amount.toString() }, spender: permit.spender,
        nonce: permit.nonce.toString(), deadline: permit.deadline.toString(), witness: { channelId: permit.channelId }, signature,
      },
    },
    // Nothing is sent. Permit2's only way to retire an unused nonce is invalidateUnorderedNonces called by
    // the owner, here the smart account, whose `execute` only its owner key (an EOA without gas) may call:
    // the relayer cannot send it. What protects the wallet instead: the permit expires within the offer's
    // maxTimeoutSeconds and at most 300 s, and until then it can only deposit into this wallet's own
    // channel (the witness names it; the collector is the only spender). Such a late deposit is not
    // spending: the next call reads the channel's balance from the chain and uses it, and the idle refund
    // (or the seller's) brings whatever is left back to the wallet. The same as payments_pay's other
    // Permit2 payments, which are left to expire.
    revokeIfUnused: async () => {},
  };
}
