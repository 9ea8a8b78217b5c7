import { getAddress, isAddressEqual, isErc6492Signature, parseErc6492Signature, type Address, type Hex } from 'viem';
import { transferAuthorizationDigest } from '../../../../chain/authorization-digest.js';
import { type DecodedPaymentHeader, type ExactEvmAuthorization, type ExactReason, toCaip2Network, toV1Network } from 'agentgate-x402-wire';
import { authorizationState, balanceOf, transferWithAuthorizationTypes, usdcDomain } from '../../../../chain/usdc.js';
import type { ChainService } from '../../../../chain/chain-service.js';
import { askErc1271, type PayerReads } from '../../../../chain/payer-reads.js';
import { chainUnavailable, signedBy } from '../../chain-checks.js';

// Verification of an x402 `exact` payment (an EIP-3009 transferWithAuthorization of USDC), read-only.

export type Verified = { ok: true; payer: Address; authorization: ExactEvmAuthorization; signature: Hex };
export type Refused = { ok: false; reason: ExactReason; message: string };

export interface PaymentTerms {
  payTo: Address;
  amountAtomic: bigint;
}

const refuse = (reason: ExactReason, message: string): Refused => ({ ok: false, reason, message });

/**
 * Checks a decoded payment against the seller's terms and the chain, cheapest checks first so a bad
 * header costs no RPC call. Read-only: nothing is claimed or sent here.
 */
export async function verifyPayment(
  decoded: DecodedPaymentHeader,
  terms: PaymentTerms,
  chain: ChainService,
  options: {
    nowSeconds: number; marginSeconds: number; /** Batches the chain reads of concurrent verifications; without it, two calls each. */ reads?: PayerReads;
    /** ERC-6492: the factories a wallet not yet deployed may be deployed from (none: such wallets are refused). */
    allowedFactories?: readonly string[];
  },
): Promise<Verified | Refused> {
  const payload = decoded.payload;
  if (decoded.version === 1) {
    if (decoded.payload.scheme !== 'exact') return refuse('unsupported_scheme', `scheme ${decoded.payload.scheme} is not supported; use exact`);
    if (toV1Network(decoded.payload.network) !== chain.network) {
      return refuse('network_mismatch', `payment is for network ${decoded.payload.network}; this seller is paid on ${chain.network}`);
    }
  } else {
    const accepted = decoded.payload.accepted;
    if (accepted.scheme !== 'exact') return refuse('unsupported_scheme', `scheme ${accepted.scheme} is not supported; use exact`);
    if (toCaip2Network(accepted.network) !== chain.caip2) {
      return refuse('network_mismatch', `payment is for network ${accepted.network}; this seller is paid on ${chain.caip2}`);
    }
    if (!isAddressEqual(accepted.asset as Address, chain.usdc.address)) {
      return refuse('asset_mismatch', `payment is in asset ${accepted.asset}; this seller accepts USDC at ${chain.usdc.address}`);
    }
  }

  const { authorization, signature } = payload.payload;
  const from = getAddress(authorization.from);
  // The EIP-712 domain is the token's own (name, version, chain id, contract): a signature made for
  // another chain, another token or another domain name does not verify here.
  const typedData = {
    domain: usdcDomain({ name: chain.usdc.name, version: chain.usdc.version, chainId: chain.chainId, verifyingContract: chain.usdc.address }),
    types: transferWithAuthorizationTypes,
    primaryType: 'TransferWithAuthorization',
    message: {
      from,
      to: getAddress(authorization.to),
      value: BigInt(authorization.value),
      validAfter: BigInt(authorization.validAfter),
      validBefore: BigInt(authorization.validBefore),
      nonce: authorization.nonce as Hex,
    },
    signature: signature as Hex,
  } as const;
  const digest = transferAuthorizationDigest({ name: chain.usdc.name, version: chain.usdc.version, chainId: chain.chainId, verifyingContract: chain.usdc.address }, typedData.message);
  // ERC-6492: a wallet not deployed yet wraps its signature with its factory and the factory's calldata.
  // Settlement deploys it through that factory first (scheme.ts), so only factories the operator allows
  // may be named; the signature is checked through the universal validator, which simulates the
  // deployment. A wallet already deployed is checked by its inner signature (ERC-1271), as the chain will.
  const wrapped = isErc6492Signature(signature as Hex) ? parseErc6492Signature(signature as Hex) : undefined;
  let checked = typedData;
  if (wrapped?.address && wrapped.data) {
    const code = await chain.publicClient.getCode({ address: from }).catch((err) => { throw chainUnavailable(err); });
    if (!code || code === '0x') {
      const factory = wrapped.address;
      if (!(options.allowedFactories ?? []).some((a) => isAddressEqual(a as Address, factory))) {
        return refuse('factory_not_allowed', `the wallet ${from} is not deployed and its factory ${factory} is not one this facilitator deploys from`);
      }
    } else {
      checked = { ...typedData, signature: wrapped.signature };
    }
  }
  if (!(await signedBy(chain, from, checked, digest))) return refuse('invalid_signature', 'the authorization is not signed by its from address for this token, chain and domain');

  if (!isAddressEqual(authorization.to as Address, terms.payTo)) {
    return refuse('recipient_mismatch', `the authorization pays ${authorization.to}, not the seller ${terms.payTo}`);
  }
  if (BigInt(authorization.value) !== terms.amountAtomic) {
    return refuse('amount_mismatch', `the authorization is for ${authorization.value} atomic units; the price is ${terms.amountAtomic}`);
  }
  const { nowSeconds, marginSeconds } = options;
  if (BigInt(authorization.validAfter) > BigInt(nowSeconds)) {
    return refuse('authorization_not_yet_valid', `the authorization is valid only after ${authorization.validAfter}`);
  }
  // Settlement takes a block or two; an authorization about to expire would revert on chain.
  if (BigInt(authorization.validBefore) <= BigInt(nowSeconds + marginSeconds)) {
    return refuse('authorization_expired', `the authorization expired (validBefore ${authorization.validBefore})`);
  }
  const nonce = authorization.nonce as Hex;
  // The token asks a payer with code (a smart wallet, an EIP-7702-delegated EOA) by ERC-1271 even when
  // the signature is an EOA's: so is the payer's answer asked here, in the same batch of reads.
  const check = { digest, signature: checked.signature as Hex };
  const { used, balance, erc1271 } = await (options.reads
    ? options.reads.read(from, nonce, check)
    : Promise.all([
      authorizationState({ client: chain.publicClient, token: chain.usdc.address, authorizer: from, nonce }),
      balanceOf({ client: chain.publicClient, token: chain.usdc.address, account: from }),
      askErc1271(chain, from, check),
    ]).then(([used, balance, erc1271]) => ({ used, balance, erc1271 }))
  ).catch((err) => { throw chainUnavailable(err); });
  if (erc1271 === 'invalid' && !(wrapped && checked === typedData)) {
    return refuse('invalid_signature', `${from} has code (a smart wallet or an EIP-7702 delegation) and its ERC-1271 isValidSignature refuses this signature, as the token will`);
  }
  if (used) return refuse('nonce_already_used', 'this authorization was already used or canceled');
  if (balance < terms.amountAtomic) return refuse('insufficient_funds', `the payer holds ${balance} atomic units; ${terms.amountAtomic} are needed`);
  return { ok: true, payer: from, authorization, signature: signature as Hex };
}
