// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/**
 * @title Permit2 — the signature-transfer half of Uniswap's Permit2, for the dev chain only
 * @notice On Base and every real network Permit2 is already deployed at 0x000000000022D473030F116dDEE9F6B43aC78BA3;
 *   this contract is placed at that address on anvil (anvil_setCode) so that x402 `upto` payments, which the
 *   official clients sign for Permit2, settle locally. It implements Permit2's published ISignatureTransfer
 *   interface for single transfers, with the same EIP-712 domain (name "Permit2", chain id, this address; no
 *   version), the same type strings, the same unordered-nonce bitmap and the same errors, so a signature
 *   valid here is valid for the real contract and the other way round. Written from the interface, not
 *   copied: no immutables (the runtime code is copied to the canonical address, so the domain separator is
 *   computed from `block.chainid` and `address(this)` on each call), and no AllowanceTransfer half (x402
 *   uses only signature transfers).
 */
contract Permit2 {
    struct TokenPermissions {
        address token;
        uint256 amount;
    }

    struct PermitTransferFrom {
        TokenPermissions permitted;
        uint256 nonce;
        uint256 deadline;
    }

    struct SignatureTransferDetails {
        address to;
        uint256 requestedAmount;
    }

    /// @notice The permit's deadline has passed.
    error SignatureExpired(uint256 signatureDeadline);
    /// @notice More was requested than the permit allows.
    error InvalidAmount(uint256 maxAmount);
    /// @notice The nonce was used (or invalidated) before.
    error InvalidNonce();
    error InvalidSignature();
    error InvalidSigner();
    error InvalidSignatureLength();
    error InvalidContractSignature();

    event UnorderedNonceInvalidation(address indexed owner, uint256 word, uint256 mask);

    bytes32 private constant DOMAIN_TYPEHASH = keccak256("EIP712Domain(string name,uint256 chainId,address verifyingContract)");
    bytes32 private constant NAME_HASH = keccak256("Permit2");
    bytes32 public constant TOKEN_PERMISSIONS_TYPEHASH = keccak256("TokenPermissions(address token,uint256 amount)");
    bytes32 public constant PERMIT_TRANSFER_FROM_TYPEHASH = keccak256(
        "PermitTransferFrom(TokenPermissions permitted,address spender,uint256 nonce,uint256 deadline)TokenPermissions(address token,uint256 amount)"
    );
    /// @dev The witness variant's type string is this stub followed by the caller's witness type string.
    string public constant PERMIT_WITNESS_TRANSFER_FROM_TYPEHASH_STUB =
        "PermitWitnessTransferFrom(TokenPermissions permitted,address spender,uint256 nonce,uint256 deadline,";

    bytes4 private constant ERC1271_MAGIC_VALUE = 0x1626ba7e;

    /// @notice owner => word position => bitmap of used nonces (bit = nonce & 0xff, word = nonce >> 8).
    mapping(address => mapping(uint256 => uint256)) public nonceBitmap;

    function DOMAIN_SEPARATOR() public view returns (bytes32) {
        return keccak256(abi.encode(DOMAIN_TYPEHASH, NAME_HASH, block.chainid, address(this)));
    }

    /// @notice Transfers `requestedAmount` of the permitted token from `owner`, who signed the permit for msg.sender.
    function permitTransferFrom(
        PermitTransferFrom calldata permit,
        SignatureTransferDetails calldata transferDetails,
        address owner,
        bytes calldata signature
    ) external {
        bytes32 structHash = keccak256(
            abi.encode(PERMIT_TRANSFER_FROM_TYPEHASH, _tokenPermissionsHash(permit.permitted), msg.sender, permit.nonce, permit.deadline)
        );
        _transfer(permit, transferDetails, owner, structHash, signature);
    }

    /// @notice The same, with extra data (`witness`, of type `witnessTypeString`) bound into the signed message.
    function permitWitnessTransferFrom(
        PermitTransferFrom calldata permit,
        SignatureTransferDetails calldata transferDetails,
        address owner,
        bytes32 witness,
        string calldata witnessTypeString,
        bytes calldata signature
    ) external {
        bytes32 typeHash = keccak256(abi.encodePacked(PERMIT_WITNESS_TRANSFER_FROM_TYPEHASH_STUB, witnessTypeString));
        bytes32 structHash = keccak256(
            abi.encode(typeHash, _tokenPermissionsHash(permit.permitted), msg.sender, permit.nonce, permit.deadline, witness)
        );
        _transfer(permit, transferDetails, owner, structHash, signature);
    }

    /// @notice Marks nonces as used without a transfer (`mask` bits of word `wordPos`), cancelling their permits.
    function invalidateUnorderedNonces(uint256 wordPos, uint256 mask) external {
        nonceBitmap[msg.sender][wordPos] |= mask;
        emit UnorderedNonceInvalidation(msg.sender, wordPos, mask);
    }

    function _transfer(
        PermitTransferFrom calldata permit,
        SignatureTransferDetails calldata transferDetails,
        address owner,
        bytes32 structHash,
        bytes calldata signature
    ) private {
        if (block.timestamp > permit.deadline) revert SignatureExpired(permit.deadline);
        if (transferDetails.requestedAmount > permit.permitted.amount) revert InvalidAmount(permit.permitted.amount);
        _useNonce(owner, permit.nonce);
        bytes32 digest = keccak256(abi.encodePacked("\x19\x01", DOMAIN_SEPARATOR(), structHash));
        _verify(signature, digest, owner);
        _safeTransferFrom(permit.permitted.token, owner, transferDetails.to, transferDetails.requestedAmount);
    }

    function _tokenPermissionsHash(TokenPermissions calldata permitted) private pure returns (bytes32) {
        return keccak256(abi.encode(TOKEN_PERMISSIONS_TYPEHASH, permitted.token, permitted.amount));
    }

    /// @dev Flips the nonce's bit; if it was already set, the nonce was used.
    function _useNonce(address owner, uint256 nonce) private {
        uint256 wordPos = nonce >> 8;
        uint256 bit = 1 << (nonce & 0xff);
        uint256 flipped = nonceBitmap[owner][wordPos] ^= bit;
        if (flipped & bit == 0) revert InvalidNonce();
    }

    /// @dev An EOA signs the digest (65-byte r,s,v or 64-byte EIP-2098 compact); a contract answers ERC-1271.
    function _verify(bytes calldata signature, bytes32 digest, address claimedSigner) private view {
        if (claimedSigner.code.length == 0) {
            bytes32 r;
            bytes32 s;
            uint8 v;
            if (signature.length == 65) {
                r = bytes32(signature[0:32]);
                s = bytes32(signature[32:64]);
                v = uint8(signature[64]);
            } else if (signature.length == 64) {
                r = bytes32(signature[0:32]);
                bytes32 vs = bytes32(signature[32:64]);
                s = vs & bytes32(0x7fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff);
                v = uint8(uint256(vs >> 255)) + 27;
            } else {
                revert InvalidSignatureLength();
            }
            address signer = ecrecover(digest, v, r, s);
            if (signer == address(0)) revert InvalidSignature();
            if (signer != claimedSigner) revert InvalidSigner();
        } else {
            (bool ok, bytes memory answer) =
                claimedSigner.staticcall(abi.encodeWithSelector(ERC1271_MAGIC_VALUE, digest, signature));
            if (!ok || answer.length < 32 || abi.decode(answer, (bytes4)) != ERC1271_MAGIC_VALUE) revert InvalidContractSignature();
        }
    }

    /// @dev transferFrom that accepts tokens returning nothing; any failure is "TRANSFER_FROM_FAILED", as in
    ///      Permit2 (solmate's SafeTransferLib), whatever the token said.
    function _safeTransferFrom(address token, address from, address to, uint256 amount) private {
        (bool ok, bytes memory answer) = token.call(abi.encodeWithSelector(0x23b872dd, from, to, amount));
        require(ok && token.code.length > 0 && (answer.length == 0 || abi.decode(answer, (bool))), "TRANSFER_FROM_FAILED");
    }
}
