// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/**
 * @title SmartAccount — a minimal ERC-1271 contract wallet with a single EOA owner
 * @notice Holds the buyer's USDC. Payments leave it through EIP-3009 `transferWithAuthorization` on the
 *   token, which (because this account has code) asks `isValidSignature(digest, signature)`.
 *
 *   Signature scheme: the owner signs the RAW 32-byte digest the verifier passes in (for USDC that is the
 *   EIP-712 digest `keccak256("\x19\x01" || domainSeparator || structHash)`). There is no EIP-191
 *   "\x19Ethereum Signed Message" wrapping and no re-hashing with this account's own domain, so a
 *   signature is `sign(digest)` with the owner key, 65 bytes r||s||v. Because the EIP-712 digest already
 *   binds chainId and the token address, and EIP-3009's `from` field names this account, a signature made
 *   for this account cannot be replayed for another account of the same owner.
 *
 *   `execute` lets the owner make arbitrary calls (e.g. a plain ERC-20 transfer, or withdrawing ETH).
 */
contract SmartAccount {
    /// @dev bytes4(keccak256("isValidSignature(bytes32,bytes)"))
    bytes4 internal constant ERC1271_MAGIC_VALUE = 0x1626ba7e;
    bytes4 internal constant ERC1271_INVALID = 0xffffffff;
    uint256 private constant SECP256K1N_HALF = 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0;

    address public immutable owner;

    event Executed(address indexed to, uint256 value, bytes data);

    constructor(address owner_) {
        require(owner_ != address(0), "SmartAccount: owner is the zero address");
        owner = owner_;
    }

    receive() external payable {}

    /// @notice ERC-1271: 0x1626ba7e when `signature` is the owner's 65-byte ECDSA signature of `hash`.
    function isValidSignature(bytes32 hash, bytes calldata signature) external view returns (bytes4) {
        return _recover(hash, signature) == owner ? ERC1271_MAGIC_VALUE : ERC1271_INVALID;
    }

    /// @notice Calls `to` with `value` wei and `data`; bubbles up the callee's revert. Owner only.
    function execute(address to, uint256 value, bytes calldata data) external returns (bytes memory result) {
        require(msg.sender == owner, "SmartAccount: caller is not the owner");
        bool success;
        (success, result) = to.call{value: value}(data);
        if (!success) {
            // solhint-disable-next-line no-inline-assembly
            assembly {
                revert(add(result, 0x20), mload(result))
            }
        }
        emit Executed(to, value, data);
    }

    /// @dev Returns address(0) for anything malformed (wrong length, high s, bad v) instead of reverting,
    ///      so that ERC-1271 callers simply see "not valid".
    function _recover(bytes32 hash, bytes calldata signature) private pure returns (address) {
        if (signature.length != 65) return address(0);
        bytes32 r = bytes32(signature[0:32]);
        bytes32 s = bytes32(signature[32:64]);
        uint8 v = uint8(signature[64]);
        if (uint256(s) > SECP256K1N_HALF) return address(0);
        if (v != 27 && v != 28) return address(0);
        return ecrecover(hash, v, r, s);
    }
}
