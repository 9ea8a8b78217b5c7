// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IDepositCollector} from "./DepositCollector.sol";
import {SafeTokenTransfer} from "./SafeTokenTransfer.sol";

interface IERC20BalanceOf {
    function balanceOf(address account) external view returns (uint256);
}

/**
 * @title X402BatchSettlement — payment channels of the x402 `batch-settlement` scheme, for the dev chain
 * @notice On real networks the x402 project's x402BatchSettlement is deployed at
 *   0x4020074e9dF2ce1deE5A9C1b5c3f541D02a10003; this contract is placed at that address on anvil so that
 *   channels opened, paid and closed by the official SDKs work locally. Written from the published scheme
 *   (specs/schemes/batch-settlement/scheme_batch_settlement_evm.md) and the ABI the x402 TypeScript SDK
 *   ships (its evm package, 2.27): same functions, structs, events, errors, EIP-712 domain ("x402 Batch
 *   Settlement", "1", chain id, this address) and type strings, so what the official client signs and what
 *   the official facilitator sends work here.
 *
 *   The model, in short:
 *   - a channel is identified by the EIP-712 hash of its immutable ChannelConfig; it exists once funded;
 *   - the payer deposits through a collector (EIP-3009 or Permit2), gasless for the payer;
 *   - the payer signs cumulative vouchers off chain: "the receiver may claim up to maxClaimableAmount in total";
 *   - the receiver side records claims (`totalClaimed`, cumulative, so an old voucher changes nothing) for many
 *     channels in one transaction, and `settle` sweeps everything claimed for a receiver and token in one transfer;
 *   - what is not claimed goes back to the payer: by the receiver side at once (`refund`), or by the payer alone
 *     after the channel's withdraw delay (`initiateWithdraw`, then `finalizeWithdraw`), which gives the receiver
 *     that long to claim the vouchers it holds.
 *   Invariant: totalClaimed <= balance for every channel, and the contract holds, per token, at least the sum of
 *   channel balances minus what `settle` has paid out.
 *
 *   Differences from the reference implementation that no caller can see: the EIP-712 domain separator is
 *   computed from `block.chainid` and `address(this)` on each call (the dev chain copies the runtime code to
 *   the canonical address, so nothing is cached from a constructor), a claim batch hashes each channel config
 *   once (not twice), and consecutive claim rows for the same receiver and token add up to one storage write.
 */
contract X402BatchSettlement {
    // ---------------------------------------------------------------- types

    struct ChannelConfig {
        address payer;
        /// @dev EOA that signs vouchers; zero: the payer signs (ECDSA, or ERC-1271 for a contract wallet).
        address payerAuthorizer;
        address receiver;
        /// @dev Signs claim batches and refunds; may also call `claim` and `refund` itself. Never zero.
        address receiverAuthorizer;
        address token;
        uint40 withdrawDelay;
        bytes32 salt;
    }

    struct ChannelState {
        uint128 balance;
        uint128 totalClaimed;
    }

    struct WithdrawalState {
        uint128 amount;
        uint40 initiatedAt;
    }

    struct ReceiverState {
        uint128 totalClaimed;
        uint128 totalSettled;
    }

    struct Voucher {
        ChannelConfig channel;
        uint128 maxClaimableAmount;
    }

    /// @dev `totalClaimed` is the cumulative total the receiver side claims with this voucher (not a delta).
    struct VoucherClaim {
        Voucher voucher;
        bytes signature;
        uint128 totalClaimed;
    }

    // ---------------------------------------------------------------- constants

    uint40 public constant MIN_WITHDRAW_DELAY = 15 minutes;
    uint40 public constant MAX_WITHDRAW_DELAY = 30 days;

    bytes32 public constant CHANNEL_CONFIG_TYPEHASH = keccak256(
        "ChannelConfig(address payer,address payerAuthorizer,address receiver,address receiverAuthorizer,address token,uint40 withdrawDelay,bytes32 salt)"
    );
    bytes32 public constant VOUCHER_TYPEHASH = keccak256("Voucher(bytes32 channelId,uint128 maxClaimableAmount)");
    bytes32 public constant REFUND_TYPEHASH = keccak256("Refund(bytes32 channelId,uint256 nonce,uint128 amount)");
    bytes32 public constant CLAIM_ENTRY_TYPEHASH =
        keccak256("ClaimEntry(bytes32 channelId,uint128 maxClaimableAmount,uint128 totalClaimed)");
    bytes32 public constant CLAIM_BATCH_TYPEHASH = keccak256(
        "ClaimBatch(ClaimEntry[] claims)ClaimEntry(bytes32 channelId,uint128 maxClaimableAmount,uint128 totalClaimed)"
    );

    bytes32 private constant DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
    string private constant DOMAIN_NAME = "x402 Batch Settlement";
    string private constant DOMAIN_VERSION = "1";
    bytes4 private constant ERC1271_MAGIC_VALUE = 0x1626ba7e;
    uint256 private constant SECP256K1N_HALF = 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0;

    // ---------------------------------------------------------------- storage

    mapping(bytes32 channelId => ChannelState) public channels;
    /// @dev Advanced by every cooperative refund, signed or direct, before the amount is capped: a signed
    ///      refund is good for one nonce, and a direct refund makes earlier signed ones stale.
    mapping(bytes32 channelId => uint256) public refundNonce;
    mapping(bytes32 channelId => WithdrawalState) public pendingWithdrawals;
    mapping(address receiver => mapping(address token => ReceiverState)) public receivers;

    /// @dev EIP-1153: the guard costs no storage write and needs no initialization at the copied address.
    bool private transient entered;

    // ---------------------------------------------------------------- events

    event ChannelCreated(bytes32 indexed channelId, ChannelConfig config);
    event ChannelClosed(bytes32 indexed channelId, ChannelConfig config);
    event Deposited(bytes32 indexed channelId, address indexed sender, uint128 amount, uint128 newBalance);
    event Claimed(bytes32 indexed channelId, address indexed sender, uint128 claimAmount, uint128 newTotalClaimed);
    event Settled(address indexed receiver, address indexed token, address indexed sender, uint128 amount);
    event Refunded(bytes32 indexed channelId, address indexed sender, uint128 amount);
    event WithdrawInitiated(bytes32 indexed channelId, uint128 amount, uint40 finalizeAfter);
    event WithdrawFinalized(bytes32 indexed channelId, address indexed sender, uint128 amount);
    /// @dev ERC-5267 declares it for domain changes; this domain never changes, so it is never emitted.
    event EIP712DomainChanged();

    // ---------------------------------------------------------------- errors

    error InvalidChannel();
    error ZeroDeposit();
    error DepositOverflow();
    error InvalidSignature();
    error NotReceiverAuthorizer();
    error NotAuthorizedToClaim();
    error NotAuthorizedToRefund();
    error ClaimExceedsCeiling();
    error ClaimExceedsBalance();
    error WithdrawalAlreadyPending();
    error WithdrawalNotPending();
    error NotAuthorizedToFinalizeWithdraw();
    error WithdrawDelayNotElapsed();
    error NothingToWithdraw();
    error WithdrawAmountExceedsAvailable();
    error WithdrawDelayOutOfRange();
    error EmptyBatch();
    error DepositCollectionFailed();
    error InvalidCollector();
    error InvalidRefundNonce();
    error ZeroRefund();
    error ReentrancyGuardReentrantCall();
    /// @dev A malformed payer-authorizer voucher signature (as OpenZeppelin's ECDSA, which the reference uses).
    error ECDSAInvalidSignature();
    error ECDSAInvalidSignatureLength(uint256 length);
    error ECDSAInvalidSignatureS(bytes32 s);
    /// @dev A call of a multicall failed without a reason (as OpenZeppelin's Address library reports it).
    error FailedCall();

    modifier nonReentrant() {
        if (entered) revert ReentrancyGuardReentrantCall();
        entered = true;
        _;
        entered = false;
    }

    // ---------------------------------------------------------------- deposits

    /// @notice Adds exactly `amount` to the channel of `config`, pulled from `config.payer` by `collector`.
    /// @dev Anyone may call: the collector needs the payer's signature bound to this channel. The balance check
    ///      after `collect` catches a collector (or a fee-on-transfer token) that moved less than `amount`.
    function deposit(ChannelConfig calldata config, uint128 amount, address collector, bytes calldata collectorData)
        external
        nonReentrant
    {
        if (
            config.payer == address(0) || config.receiver == address(0) || config.receiverAuthorizer == address(0)
                || config.token == address(0)
        ) revert InvalidChannel();
        if (config.withdrawDelay < MIN_WITHDRAW_DELAY || config.withdrawDelay > MAX_WITHDRAW_DELAY) {
            revert WithdrawDelayOutOfRange();
        }
        if (amount == 0) revert ZeroDeposit();
        if (collector == address(0)) revert InvalidCollector();

        bytes32 channelId = getChannelId(config);
        ChannelState storage channel = channels[channelId];
        uint128 previousBalance = channel.balance;
        if (amount > type(uint128).max - previousBalance) revert DepositOverflow();
        uint128 newBalance = previousBalance + amount;
        channel.balance = newBalance;

        uint256 held = IERC20BalanceOf(config.token).balanceOf(address(this));
        IDepositCollector(collector).collect(config.payer, config.token, amount, channelId, collectorData);
        if (IERC20BalanceOf(config.token).balanceOf(address(this)) != held + amount) revert DepositCollectionFailed();

        // An empty balance implies nothing claimed (claims never exceed the balance): the channel (re)opens.
        if (previousBalance == 0) emit ChannelCreated(channelId, config);
        emit Deposited(channelId, msg.sender, amount, newBalance);
    }

    // ---------------------------------------------------------------- claims and settlement

    /// @notice Records voucher claims for many channels; the caller is each row's receiver or receiverAuthorizer.
    function claim(VoucherClaim[] calldata voucherClaims) external nonReentrant {
        uint256 count = voucherClaims.length;
        if (count == 0) revert EmptyBatch();
        bytes32 domain = _domainSeparator();
        ReceiverTally memory tally;
        for (uint256 i; i < count; ++i) {
            VoucherClaim calldata row = voucherClaims[i];
            ChannelConfig calldata config = row.voucher.channel;
            if (msg.sender != config.receiverAuthorizer && msg.sender != config.receiver) revert NotAuthorizedToClaim();
            _applyClaim(row, _channelId(domain, config), domain, tally);
        }
        _addToReceiver(tally);
    }

    /// @notice Records voucher claims authorized by the receiverAuthorizer's EIP-712 `ClaimBatch` signature;
    ///   anyone may relay. Every row must name the same receiverAuthorizer.
    function claimWithSignature(VoucherClaim[] calldata voucherClaims, bytes calldata authorizerSignature)
        external
        nonReentrant
    {
        uint256 count = voucherClaims.length;
        if (count == 0) revert EmptyBatch();
        bytes32 domain = _domainSeparator();
        address authorizer = voucherClaims[0].voucher.channel.receiverAuthorizer;
        bytes32[] memory channelIds = new bytes32[](count);
        bytes32 digest = _claimBatchDigest(domain, voucherClaims, channelIds);
        if (!_isValidSignatureNow(authorizer, digest, authorizerSignature)) revert InvalidSignature();
        ReceiverTally memory tally;
        for (uint256 i; i < count; ++i) {
            VoucherClaim calldata row = voucherClaims[i];
            if (row.voucher.channel.receiverAuthorizer != authorizer) revert NotReceiverAuthorizer();
            _applyClaim(row, channelIds[i], domain, tally);
        }
        _addToReceiver(tally);
    }

    /// @notice Pays `receiver` everything claimed for it in `token` and not yet paid. Anyone may call.
    function settle(address receiver, address token) external nonReentrant {
        ReceiverState storage state = receivers[receiver][token];
        uint128 claimed = state.totalClaimed;
        uint128 amount = claimed - state.totalSettled;
        if (amount == 0) return;
        state.totalSettled = claimed;
        SafeTokenTransfer.safeTransfer(token, receiver, amount);
        emit Settled(receiver, token, msg.sender, amount);
    }

    // ---------------------------------------------------------------- timed withdrawal (payer side)

    /// @notice Starts the payer's withdrawal of up to `amount` of unclaimed escrow; final after `withdrawDelay`.
    function initiateWithdraw(ChannelConfig calldata config, uint128 amount) external nonReentrant {
        if (msg.sender != config.payer && msg.sender != config.payerAuthorizer) revert InvalidChannel();
        if (amount == 0) revert NothingToWithdraw();
        bytes32 channelId = getChannelId(config);
        WithdrawalState storage withdrawal = pendingWithdrawals[channelId];
        if (withdrawal.initiatedAt != 0) revert WithdrawalAlreadyPending();
        ChannelState memory channel = channels[channelId];
        if (amount > channel.balance - channel.totalClaimed) revert WithdrawAmountExceedsAvailable();
        withdrawal.amount = amount;
        withdrawal.initiatedAt = uint40(block.timestamp);
        emit WithdrawInitiated(channelId, amount, uint40(block.timestamp) + config.withdrawDelay);
    }

    /// @notice Completes a withdrawal once its delay has passed; pays what is still unclaimed, up to the amount asked.
    function finalizeWithdraw(ChannelConfig calldata config) external nonReentrant {
        if (msg.sender != config.payer && msg.sender != config.payerAuthorizer) revert NotAuthorizedToFinalizeWithdraw();
        bytes32 channelId = getChannelId(config);
        WithdrawalState memory withdrawal = pendingWithdrawals[channelId];
        if (withdrawal.initiatedAt == 0) revert WithdrawalNotPending();
        if (block.timestamp < uint256(withdrawal.initiatedAt) + config.withdrawDelay) revert WithdrawDelayNotElapsed();

        ChannelState storage channel = channels[channelId];
        uint128 available = channel.balance - channel.totalClaimed;
        uint128 amount = withdrawal.amount < available ? withdrawal.amount : available;
        delete pendingWithdrawals[channelId];
        uint128 newBalance = channel.balance - amount;
        channel.balance = newBalance;

        emit WithdrawFinalized(channelId, msg.sender, amount);
        if (newBalance == 0) emit ChannelClosed(channelId, config);
        if (amount > 0) SafeTokenTransfer.safeTransfer(config.token, config.payer, amount);
    }

    // ---------------------------------------------------------------- cooperative refund (receiver side)

    /// @notice Returns up to `amount` of unclaimed escrow to the payer; the caller is the receiver or receiverAuthorizer.
    function refund(ChannelConfig calldata config, uint128 amount) external nonReentrant {
        if (msg.sender != config.receiverAuthorizer && msg.sender != config.receiver) revert NotAuthorizedToRefund();
        _refund(config, getChannelId(config), amount);
    }

    /// @notice The same, authorized by the receiverAuthorizer's EIP-712 `Refund` signature for the current nonce;
    ///   anyone may relay.
    function refundWithSignature(
        ChannelConfig calldata config,
        uint128 amount,
        uint256 nonce,
        bytes calldata receiverAuthorizerSignature
    ) external nonReentrant {
        bytes32 channelId = getChannelId(config);
        if (nonce != refundNonce[channelId]) revert InvalidRefundNonce();
        if (!_isValidSignatureNow(config.receiverAuthorizer, getRefundDigest(channelId, nonce, amount), receiverAuthorizerSignature)) {
            revert InvalidSignature();
        }
        _refund(config, channelId, amount);
    }

    // ---------------------------------------------------------------- batching

    /// @notice Runs several calls of this contract in one transaction (e.g. claimWithSignature then
    ///   refundWithSignature); any failure reverts them all.
    function multicall(bytes[] calldata data) external returns (bytes[] memory results) {
        results = new bytes[](data.length);
        for (uint256 i; i < data.length; ++i) {
            (bool ok, bytes memory result) = address(this).delegatecall(data[i]);
            if (!ok) {
                if (result.length == 0) revert FailedCall();
                assembly ("memory-safe") {
                    revert(add(result, 0x20), mload(result))
                }
            }
            results[i] = result;
        }
    }

    // ---------------------------------------------------------------- views

    function getChannelId(ChannelConfig calldata config) public view returns (bytes32) {
        return _channelId(_domainSeparator(), config);
    }

    function getVoucherDigest(bytes32 channelId, uint128 maxClaimableAmount) public view returns (bytes32) {
        return _voucherDigest(_domainSeparator(), channelId, maxClaimableAmount);
    }

    function getRefundDigest(bytes32 channelId, uint256 nonce, uint128 amount) public view returns (bytes32) {
        return _typedDataHash(_domainSeparator(), keccak256(abi.encode(REFUND_TYPEHASH, channelId, nonce, amount)));
    }

    /// @dev Defined for an empty batch too (the claims array hashes to keccak256("")), for off-chain tools.
    function getClaimBatchDigest(VoucherClaim[] calldata voucherClaims) public view returns (bytes32) {
        return _claimBatchDigest(_domainSeparator(), voucherClaims, new bytes32[](voucherClaims.length));
    }

    /// @notice ERC-5267: the EIP-712 domain (name, version, chain id, verifying contract).
    function eip712Domain()
        external
        view
        returns (
            bytes1 fields,
            string memory name,
            string memory version,
            uint256 chainId,
            address verifyingContract,
            bytes32 salt,
            uint256[] memory extensions
        )
    {
        return (hex"0f", DOMAIN_NAME, DOMAIN_VERSION, block.chainid, address(this), bytes32(0), new uint256[](0));
    }

    // ---------------------------------------------------------------- internals

    /// @dev What a batch of claims owes one receiver in one token, written to storage once per run of rows.
    struct ReceiverTally {
        address receiver;
        address token;
        uint128 amount;
    }

    /// @dev Raises the channel's totalClaimed to the row's, if higher, after checking the payer's voucher.
    ///      A row at or below what is already claimed is a no-op: replaying an old voucher changes nothing.
    function _applyClaim(VoucherClaim calldata row, bytes32 channelId, bytes32 domain, ReceiverTally memory tally) private {
        ChannelState storage channel = channels[channelId];
        ChannelState memory current = channel;
        uint128 newTotal = row.totalClaimed;
        if (newTotal <= current.totalClaimed) return;
        uint128 ceiling = row.voucher.maxClaimableAmount;
        if (newTotal > ceiling) revert ClaimExceedsCeiling();
        if (newTotal > current.balance) revert ClaimExceedsBalance();

        ChannelConfig calldata config = row.voucher.channel;
        bytes32 digest = _voucherDigest(domain, channelId, ceiling);
        bool signed = config.payerAuthorizer != address(0)
            ? _recoverOrRevert(digest, row.signature) == config.payerAuthorizer
            : _isValidSignatureNow(config.payer, digest, row.signature);
        if (!signed) revert InvalidSignature();

        channel.totalClaimed = newTotal;
        uint128 delta = newTotal - current.totalClaimed;
        if (tally.receiver != config.receiver || tally.token != config.token) {
            _addToReceiver(tally);
            tally.receiver = config.receiver;
            tally.token = config.token;
            tally.amount = 0;
        }
        tally.amount += delta;
        emit Claimed(channelId, msg.sender, delta, newTotal);
    }

    function _addToReceiver(ReceiverTally memory tally) private {
        if (tally.amount != 0) receivers[tally.receiver][tally.token].totalClaimed += tally.amount;
    }

    /// @dev Shared by both refund paths: the nonce moves first, even when nothing is left to return.
    function _refund(ChannelConfig calldata config, bytes32 channelId, uint128 amount) private {
        if (amount == 0) revert ZeroRefund();
        unchecked {
            ++refundNonce[channelId];
        }
        ChannelState storage channel = channels[channelId];
        uint128 available = channel.balance - channel.totalClaimed;
        uint128 refunded = amount < available ? amount : available;
        if (refunded == 0) return;
        uint128 newBalance = channel.balance - refunded;
        channel.balance = newBalance;

        // A pending withdrawal asks for escrow the refund has just returned: it shrinks by as much, or ends.
        WithdrawalState storage withdrawal = pendingWithdrawals[channelId];
        if (withdrawal.initiatedAt != 0) {
            if (refunded >= withdrawal.amount) delete pendingWithdrawals[channelId];
            else withdrawal.amount -= refunded;
        }

        emit Refunded(channelId, msg.sender, refunded);
        if (newBalance == 0) emit ChannelClosed(channelId, config);
        SafeTokenTransfer.safeTransfer(config.token, config.payer, refunded);
    }

    function _domainSeparator() private view returns (bytes32) {
        return keccak256(
            abi.encode(DOMAIN_TYPEHASH, keccak256(bytes(DOMAIN_NAME)), keccak256(bytes(DOMAIN_VERSION)), block.chainid, address(this))
        );
    }

    // The hashes below run once or more per claimed channel. They are written in assembly over the free memory
    // (used as scratch space, never allocated), because the equivalent abi.encode allocates memory that is never
    // reused and validates fields one by one: in a batch of 50 claims that overhead cost more than the storage
    // writes. Each computes exactly keccak256(abi.encode(...)) of the same values.

    /// @dev EIP-712: keccak256("\x19\x01" ‖ domainSeparator ‖ structHash).
    function _typedDataHash(bytes32 domain, bytes32 structHash) private pure returns (bytes32 digest) {
        assembly ("memory-safe") {
            let m := mload(0x40)
            mstore(m, 0x1901)
            mstore(add(m, 0x20), domain)
            mstore(add(m, 0x40), structHash)
            digest := keccak256(add(m, 0x1e), 0x42)
        }
    }

    /// @dev keccak256(abi.encode(CHANNEL_CONFIG_TYPEHASH, config)) under the domain. A config whose addresses or
    ///      withdrawDelay carry dirty high bits is refused, as the ABI decoder would: the id is of clean values.
    function _channelId(bytes32 domain, ChannelConfig calldata config) private pure returns (bytes32) {
        bytes32 typeHash = CHANNEL_CONFIG_TYPEHASH;
        bytes32 structHash;
        assembly ("memory-safe") {
            let m := mload(0x40)
            mstore(m, typeHash)
            calldatacopy(add(m, 0x20), config, 0xe0)
            let dirty := or(
                or(or(shr(160, mload(add(m, 0x20))), shr(160, mload(add(m, 0x40)))), or(shr(160, mload(add(m, 0x60))), shr(160, mload(add(m, 0x80))))),
                or(shr(160, mload(add(m, 0xa0))), shr(40, mload(add(m, 0xc0))))
            )
            if dirty { revert(0, 0) }
            structHash := keccak256(m, 0x100)
        }
        return _typedDataHash(domain, structHash);
    }

    /// @dev keccak256(abi.encode(VOUCHER_TYPEHASH, channelId, maxClaimableAmount)) under the domain.
    function _voucherDigest(bytes32 domain, bytes32 channelId, uint128 maxClaimableAmount) private pure returns (bytes32) {
        return _typedDataHash(domain, _hash3(VOUCHER_TYPEHASH, channelId, maxClaimableAmount));
    }

    /// @dev keccak256(abi.encode(a, b, c)) for three words.
    function _hash3(bytes32 a, bytes32 b, uint256 c) private pure returns (bytes32 hash) {
        assembly ("memory-safe") {
            let m := mload(0x40)
            mstore(m, a)
            mstore(add(m, 0x20), b)
            mstore(add(m, 0x40), c)
            hash := keccak256(m, 0x60)
        }
    }

    /// @dev keccak256(abi.encode(CLAIM_ENTRY_TYPEHASH, channelId, maxClaimableAmount, totalClaimed)).
    function _claimEntryHash(bytes32 channelId, uint128 maxClaimableAmount, uint128 totalClaimed) private pure returns (bytes32 hash) {
        bytes32 typeHash = CLAIM_ENTRY_TYPEHASH;
        assembly ("memory-safe") {
            let m := mload(0x40)
            mstore(m, typeHash)
            mstore(add(m, 0x20), channelId)
            mstore(add(m, 0x40), maxClaimableAmount)
            mstore(add(m, 0x60), totalClaimed)
            hash := keccak256(m, 0x80)
        }
    }

    /// @dev EIP-712 hash of ClaimBatch{claims: ClaimEntry[]}; fills `channelIds` so the claims need not hash again.
    function _claimBatchDigest(bytes32 domain, VoucherClaim[] calldata rows, bytes32[] memory channelIds)
        private
        pure
        returns (bytes32)
    {
        bytes32[] memory entryHashes = new bytes32[](rows.length);
        for (uint256 i; i < rows.length; ++i) {
            VoucherClaim calldata row = rows[i];
            bytes32 channelId = _channelId(domain, row.voucher.channel);
            channelIds[i] = channelId;
            entryHashes[i] = _claimEntryHash(channelId, row.voucher.maxClaimableAmount, row.totalClaimed);
        }
        return _typedDataHash(domain, keccak256(abi.encode(CLAIM_BATCH_TYPEHASH, keccak256(abi.encodePacked(entryHashes)))));
    }

    /// @dev ECDSA over a 65-byte r||s||v signature; address(0) for anything malformed or malleable (high s).
    function _recover(bytes32 digest, bytes calldata signature) private pure returns (address) {
        if (signature.length != 65) return address(0);
        (bytes32 r, bytes32 s, uint8 v) = _split(signature);
        if (uint256(s) > SECP256K1N_HALF) return address(0);
        return ecrecover(digest, v, r, s);
    }

    /// @dev The same, reverting on a malformed signature with OpenZeppelin ECDSA's errors (as the reference does
    ///      for payer-authorizer vouchers).
    function _recoverOrRevert(bytes32 digest, bytes calldata signature) private pure returns (address signer) {
        if (signature.length != 65) revert ECDSAInvalidSignatureLength(signature.length);
        (bytes32 r, bytes32 s, uint8 v) = _split(signature);
        if (uint256(s) > SECP256K1N_HALF) revert ECDSAInvalidSignatureS(s);
        signer = ecrecover(digest, v, r, s);
        if (signer == address(0)) revert ECDSAInvalidSignature();
    }

    /// @dev r, s, v of a signature known to be 65 bytes long.
    function _split(bytes calldata signature) private pure returns (bytes32 r, bytes32 s, uint8 v) {
        assembly ("memory-safe") {
            r := calldataload(signature.offset)
            s := calldataload(add(signature.offset, 0x20))
            v := byte(0, calldataload(add(signature.offset, 0x40)))
        }
    }

    /// @dev As OpenZeppelin's SignatureChecker: an address without code signs with ECDSA, a contract answers
    ///      ERC-1271. The zero address never signs.
    function _isValidSignatureNow(address signer, bytes32 digest, bytes calldata signature) private view returns (bool) {
        if (signer == address(0)) return false;
        if (signer.code.length == 0) return _recover(digest, signature) == signer;
        (bool ok, bytes memory answer) =
            signer.staticcall(abi.encodeWithSelector(ERC1271_MAGIC_VALUE, digest, signature));
        return ok && answer.length >= 32 && abi.decode(answer, (bytes32)) == bytes32(ERC1271_MAGIC_VALUE);
    }
}
