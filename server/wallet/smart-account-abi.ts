/**
 * The parts of contracts/SmartAccountFactory.sol the server calls, written out so production never
 * needs the Solidity compiler at run time.
 */
export const smartAccountFactoryAbi = [
  {
    type: 'function',
    name: 'createAccount',
    stateMutability: 'nonpayable',
    inputs: [{ name: 'owner', type: 'address' }, { name: 'salt', type: 'bytes32' }],
    outputs: [{ name: 'account', type: 'address' }],
  },
  {
    type: 'function',
    name: 'getAddress',
    stateMutability: 'view',
    inputs: [{ name: 'owner', type: 'address' }, { name: 'salt', type: 'bytes32' }],
    outputs: [{ type: 'address' }],
  },
] as const;

/** The token functions the dev faucet uses beyond usdc.ts's EIP-3009 subset: FiatTokenV2_2's `mint`, for configured minters only, and `isMinter`. */
export const devTokenAbi = [
  {
    type: 'function',
    name: 'mint',
    stateMutability: 'nonpayable',
    inputs: [{ name: 'to', type: 'address' }, { name: 'amount', type: 'uint256' }],
    outputs: [{ type: 'bool' }],
  },
  {
    type: 'function',
    name: 'isMinter',
    stateMutability: 'view',
    inputs: [{ name: 'account', type: 'address' }],
    outputs: [{ type: 'bool' }],
  },
] as const;
