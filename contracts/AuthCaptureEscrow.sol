// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {TokenCollector} from "./TokenCollector.sol";
import {TokenStore} from "./TokenStore.sol";
import {TokenTransfers} from "./TokenTransfers.sol";

/**
 * @title AuthCaptureEscrow — Base's Commerce Payments escrow (v1.1 interface), for the dev chain only
 * @notice On Base the escrow is deployed at 0xf96815976523E00e65Be8f34cA5e64b4f41EB19c (commerce-payments
 *   v1.1, the deployment x402's `auth-capture` scheme uses by default); this contract is placed at that
 *   address on anvil (server/dev/chain/escrow.ts) so that payments the official x402 client signs settle
 *   locally. Written from the published interface and documentation, not copied. It keeps the published
 *   ABI exactly: the PaymentInfo struct and its EIP-712-style hash, every function, event and error, and the
 *   v1.1 fee rule (capture and charge take an absolute `feeAmount`, bounded per call by the payer-signed
 *   basis points, integer division as on chain).
 *
 *   The payment's life, per PaymentInfo hash:
 *   - `authorize` pulls up to `maxAmount` from the payer (through a token collector) into the operator's
 *     token store and makes it capturable; `charge` does the same and pays the receiver at once;
 *   - `capture` pays captured amounts out to the receiver (minus the fee), any number of times, until the
 *     authorization expires; `void` (operator) or `reclaim` (payer, after that expiry) return what is left;
 *   - `refund` gives captured money back to the payer until the refund expiry, funded by a refund collector.
 *   A payment is collected at most once: the hash, which commits to every field including the salt,
 *   cannot be authorized or charged again.
 */
contract AuthCaptureEscrow {
    /// @notice Everything the payer signed for (through the collector's nonce) and the operator acts on.
    struct PaymentInfo {
        /// @dev The only sender allowed to authorize, charge, capture, void and refund.
        address operator;
        address payer;
        /// @dev Who is paid (minus the fee) on capture and charge.
        address receiver;
        address token;
        /// @dev The most that may be collected from the payer.
        uint120 maxAmount;
        /// @dev Authorize and charge are possible before this instant only.
        uint48 preApprovalExpiry;
        /// @dev Capture is possible before this instant; from it on the payer may reclaim.
        uint48 authorizationExpiry;
        /// @dev Refund is possible before this instant.
        uint48 refundExpiry;
        /// @dev Fee bounds, in basis points of each captured or charged amount.
        uint16 minFeeBps;
        uint16 maxFeeBps;
        /// @dev The fee's recipient; the zero address lets the operator name one per call.
        address feeReceiver;
        /// @dev Makes two otherwise equal payments distinct.
        uint256 salt;
    }

    struct PaymentState {
        /// @dev Set by authorize or charge, for good: a payment is collected once.
        bool hasCollectedPayment;
        /// @dev Held in escrow, waiting for capture, void or reclaim.
        uint120 capturableAmount;
        /// @dev Captured (or charged) and not refunded yet.
        uint120 refundableAmount;
    }

    bytes32 public constant PAYMENT_INFO_TYPEHASH = keccak256(
        "PaymentInfo(address operator,address payer,address receiver,address token,uint120 maxAmount,uint48 preApprovalExpiry,uint48 authorizationExpiry,uint48 refundExpiry,uint16 minFeeBps,uint16 maxFeeBps,address feeReceiver,uint256 salt)"
    );

    uint16 private constant BPS_DENOMINATOR = 10_000;

    /// @notice The code every operator's token store runs (each store is a minimal proxy to it).
    address public immutable tokenStoreImplementation;

    mapping(bytes32 paymentInfoHash => PaymentState state) public paymentState;

    bool private transient entered;

    event PaymentCharged(
        bytes32 indexed paymentInfoHash,
        PaymentInfo paymentInfo,
        uint256 amount,
        address tokenCollector,
        uint256 feeAmount,
        address feeReceiver
    );
    event PaymentAuthorized(bytes32 indexed paymentInfoHash, PaymentInfo paymentInfo, uint256 amount, address tokenCollector);
    event PaymentCaptured(bytes32 indexed paymentInfoHash, uint256 amount, uint256 feeAmount, address feeReceiver);
    event PaymentVoided(bytes32 indexed paymentInfoHash, uint256 amount);
    event PaymentReclaimed(bytes32 indexed paymentInfoHash, uint256 amount);
    event PaymentRefunded(bytes32 indexed paymentInfoHash, uint256 amount, address tokenCollector);
    event TokenStoreCreated(address indexed operator, address tokenStore);

    error InvalidSender(address sender, address expected);
    error ZeroAmount();
    error AmountOverflow(uint256 amount, uint256 limit);
    error ExceedsMaxAmount(uint256 amount, uint256 maxAmount);
    error AfterPreApprovalExpiry(uint48 timestamp, uint48 expiry);
    error InvalidExpiries(uint48 preApproval, uint48 authorization, uint48 refund);
    error FeeBpsOverflow(uint16 feeBps);
    error InvalidFeeBpsRange(uint16 minFeeBps, uint16 maxFeeBps);
    error FeeAmountOutOfRange(uint256 feeAmount, uint256 minFee, uint256 maxFee);
    error ZeroFeeReceiver();
    error InvalidFeeReceiver(address attempted, address expected);
    error InvalidCollectorForOperation();
    error TokenCollectionFailed();
    error PaymentAlreadyCollected(bytes32 paymentInfoHash);
    error AfterAuthorizationExpiry(uint48 timestamp, uint48 expiry);
    error InsufficientAuthorization(bytes32 paymentInfoHash, uint256 authorizedAmount, uint256 requestedAmount);
    error ZeroAuthorization(bytes32 paymentInfoHash);
    error BeforeAuthorizationExpiry(uint48 timestamp, uint48 expiry);
    error AfterRefundExpiry(uint48 timestamp, uint48 expiry);
    error RefundExceedsCapture(uint256 refund, uint256 captured);
    /// @notice A call re-entered the escrow (the published contract's guard names it so).
    error Reentrancy();

    modifier nonReentrant() {
        if (entered) revert Reentrancy();
        entered = true;
        _;
        entered = false;
    }

    modifier onlySender(address expected) {
        if (msg.sender != expected) revert InvalidSender(msg.sender, expected);
        _;
    }

    /// @dev Amounts live in uint120 state; zero moves nothing and would only clutter the history.
    modifier validAmount(uint256 amount) {
        if (amount == 0) revert ZeroAmount();
        if (amount > type(uint120).max) revert AmountOverflow(amount, type(uint120).max);
        _;
    }

    constructor() {
        tokenStoreImplementation = address(new TokenStore(address(this)));
    }

    /// @notice Collects `amount` from the payer and pays the receiver (minus `feeAmount`) in one step;
    ///   the payment is then refundable, never capturable.
    function charge(
        PaymentInfo calldata paymentInfo,
        uint256 amount,
        address tokenCollector,
        bytes calldata collectorData,
        uint256 feeAmount,
        address feeReceiver
    ) external nonReentrant onlySender(paymentInfo.operator) validAmount(amount) {
        _checkCollectable(paymentInfo, amount);
        _checkFee(paymentInfo, amount, feeAmount, feeReceiver);
        bytes32 paymentInfoHash = _uncollectedHash(paymentInfo);
        paymentState[paymentInfoHash] =
            PaymentState({hasCollectedPayment: true, capturableAmount: 0, refundableAmount: uint120(amount)});
        emit PaymentCharged(paymentInfoHash, paymentInfo, amount, tokenCollector, feeAmount, feeReceiver);

        _collect(paymentInfo, amount, tokenCollector, collectorData, TokenCollector.CollectorType.Payment);
        _payOut(paymentInfo, amount, feeAmount, feeReceiver);
    }

    /// @notice Collects `amount` from the payer into escrow, capturable until the authorization expiry.
    function authorize(
        PaymentInfo calldata paymentInfo,
        uint256 amount,
        address tokenCollector,
        bytes calldata collectorData
    ) external nonReentrant onlySender(paymentInfo.operator) validAmount(amount) {
        _checkCollectable(paymentInfo, amount);
        bytes32 paymentInfoHash = _uncollectedHash(paymentInfo);
        paymentState[paymentInfoHash] =
            PaymentState({hasCollectedPayment: true, capturableAmount: uint120(amount), refundableAmount: 0});
        emit PaymentAuthorized(paymentInfoHash, paymentInfo, amount, tokenCollector);

        _collect(paymentInfo, amount, tokenCollector, collectorData, TokenCollector.CollectorType.Payment);
    }

    /// @notice Pays `amount` of the escrowed funds to the receiver (minus `feeAmount` to `feeReceiver`).
    ///   Repeatable while something is capturable and the authorization has not expired.
    function capture(PaymentInfo calldata paymentInfo, uint256 amount, uint256 feeAmount, address feeReceiver)
        external
        nonReentrant
        onlySender(paymentInfo.operator)
        validAmount(amount)
    {
        _checkFee(paymentInfo, amount, feeAmount, feeReceiver);
        if (block.timestamp >= paymentInfo.authorizationExpiry) {
            revert AfterAuthorizationExpiry(uint48(block.timestamp), paymentInfo.authorizationExpiry);
        }
        bytes32 paymentInfoHash = getHash(paymentInfo);
        PaymentState storage state = paymentState[paymentInfoHash];
        if (state.capturableAmount < amount) {
            revert InsufficientAuthorization(paymentInfoHash, state.capturableAmount, amount);
        }
        state.capturableAmount -= uint120(amount);
        state.refundableAmount += uint120(amount);
        emit PaymentCaptured(paymentInfoHash, amount, feeAmount, feeReceiver);

        _payOut(paymentInfo, amount, feeAmount, feeReceiver);
    }

    /// @notice The operator ends the authorization: everything still held goes back to the payer.
    function void(PaymentInfo calldata paymentInfo) external nonReentrant onlySender(paymentInfo.operator) {
        (bytes32 paymentInfoHash, uint256 held) = _releaseHold(paymentInfo);
        emit PaymentVoided(paymentInfoHash, held);
        _send(paymentInfo.operator, paymentInfo.token, paymentInfo.payer, held);
    }

    /// @notice The payer takes back what is still held, once the authorization has expired.
    function reclaim(PaymentInfo calldata paymentInfo) external nonReentrant onlySender(paymentInfo.payer) {
        if (block.timestamp < paymentInfo.authorizationExpiry) {
            revert BeforeAuthorizationExpiry(uint48(block.timestamp), paymentInfo.authorizationExpiry);
        }
        (bytes32 paymentInfoHash, uint256 held) = _releaseHold(paymentInfo);
        emit PaymentReclaimed(paymentInfoHash, held);
        _send(paymentInfo.operator, paymentInfo.token, paymentInfo.payer, held);
    }

    /// @notice Gives up to the captured amount back to the payer, before the refund expiry. The money comes
    ///   from a refund collector (e.g. the operator's allowance), never from other payments in escrow.
    function refund(
        PaymentInfo calldata paymentInfo,
        uint256 amount,
        address tokenCollector,
        bytes calldata collectorData
    ) external nonReentrant onlySender(paymentInfo.operator) validAmount(amount) {
        if (block.timestamp >= paymentInfo.refundExpiry) {
            revert AfterRefundExpiry(uint48(block.timestamp), paymentInfo.refundExpiry);
        }
        bytes32 paymentInfoHash = getHash(paymentInfo);
        PaymentState storage state = paymentState[paymentInfoHash];
        uint120 refundable = state.refundableAmount;
        if (refundable < amount) revert RefundExceedsCapture(amount, refundable);
        state.refundableAmount = refundable - uint120(amount);
        emit PaymentRefunded(paymentInfoHash, amount, tokenCollector);

        _collect(paymentInfo, amount, tokenCollector, collectorData, TokenCollector.CollectorType.Refund);
        _send(paymentInfo.operator, paymentInfo.token, paymentInfo.payer, amount);
    }

    /// @notice The payment's identifier: the typed hash of its info, bound to this chain and this contract.
    function getHash(PaymentInfo calldata paymentInfo) public view returns (bytes32) {
        bytes32 infoHash = keccak256(abi.encode(PAYMENT_INFO_TYPEHASH, paymentInfo));
        return keccak256(abi.encode(block.chainid, address(this), infoHash));
    }

    /// @notice Where `operator`'s payments are held: a CREATE2 minimal proxy, deployed on first payout.
    function getTokenStore(address operator) public view returns (address) {
        bytes32 initCodeHash = keccak256(_tokenStoreInitCode());
        return address(uint160(uint256(keccak256(abi.encodePacked(bytes1(0xff), address(this), _tokenStoreSalt(operator), initCodeHash)))));
    }

    /// @dev What authorize and charge require of the payment (and `amount`) before anything moves.
    function _checkCollectable(PaymentInfo calldata paymentInfo, uint256 amount) private view {
        if (amount > paymentInfo.maxAmount) revert ExceedsMaxAmount(amount, paymentInfo.maxAmount);
        uint48 nowTime = uint48(block.timestamp);
        uint48 preApproval = paymentInfo.preApprovalExpiry;
        uint48 authorization = paymentInfo.authorizationExpiry;
        uint48 refundEnd = paymentInfo.refundExpiry;
        if (nowTime >= preApproval) revert AfterPreApprovalExpiry(nowTime, preApproval);
        if (preApproval > authorization || authorization > refundEnd) {
            revert InvalidExpiries(preApproval, authorization, refundEnd);
        }
        if (paymentInfo.maxFeeBps > BPS_DENOMINATOR) revert FeeBpsOverflow(paymentInfo.maxFeeBps);
        if (paymentInfo.minFeeBps > paymentInfo.maxFeeBps) {
            revert InvalidFeeBpsRange(paymentInfo.minFeeBps, paymentInfo.maxFeeBps);
        }
    }

    /// @dev v1.1: the operator names the fee in token units; the payer's basis points bound it for this
    ///   `amount`, both bounds rounded down.
    function _checkFee(PaymentInfo calldata paymentInfo, uint256 amount, uint256 feeAmount, address feeReceiver)
        private
        pure
    {
        uint256 minFee = amount * paymentInfo.minFeeBps / BPS_DENOMINATOR;
        uint256 maxFee = amount * paymentInfo.maxFeeBps / BPS_DENOMINATOR;
        if (feeAmount < minFee || feeAmount > maxFee) revert FeeAmountOutOfRange(feeAmount, minFee, maxFee);
        if (feeAmount > 0 && feeReceiver == address(0)) revert ZeroFeeReceiver();
        // A recipient the payer signed binds every call, even one without a fee.
        if (paymentInfo.feeReceiver != address(0) && paymentInfo.feeReceiver != feeReceiver) {
            revert InvalidFeeReceiver(feeReceiver, paymentInfo.feeReceiver);
        }
    }

    /// @dev The payment's hash, if it was never authorized nor charged: a payment is collected once.
    function _uncollectedHash(PaymentInfo calldata paymentInfo) private view returns (bytes32 paymentInfoHash) {
        paymentInfoHash = getHash(paymentInfo);
        if (paymentState[paymentInfoHash].hasCollectedPayment) revert PaymentAlreadyCollected(paymentInfoHash);
    }

    /// @dev Zeroes the capturable amount (void and reclaim) and says how much that was.
    function _releaseHold(PaymentInfo calldata paymentInfo) private returns (bytes32 paymentInfoHash, uint256 held) {
        paymentInfoHash = getHash(paymentInfo);
        held = paymentState[paymentInfoHash].capturableAmount;
        if (held == 0) revert ZeroAuthorization(paymentInfoHash);
        paymentState[paymentInfoHash].capturableAmount = 0;
    }

    /// @dev Has the collector bring exactly `amount` into the operator's token store: the store's balance
    ///   is measured, because a collector is any contract the operator names.
    function _collect(
        PaymentInfo calldata paymentInfo,
        uint256 amount,
        address tokenCollector,
        bytes calldata collectorData,
        TokenCollector.CollectorType expectedType
    ) private {
        if (TokenCollector(tokenCollector).collectorType() != expectedType) revert InvalidCollectorForOperation();
        address store = getTokenStore(paymentInfo.operator);
        uint256 before = TokenTransfers.balanceOf(paymentInfo.token, store);
        TokenCollector(tokenCollector).collectTokens(paymentInfo, store, amount, collectorData);
        if (TokenTransfers.balanceOf(paymentInfo.token, store) != before + amount) revert TokenCollectionFailed();
    }

    /// @dev Capture and charge: the fee to its receiver, the rest to the payment's receiver. `msg.sender` is
    ///   the operator (both callers are operator-only), whose store holds the money.
    function _payOut(PaymentInfo calldata paymentInfo, uint256 amount, uint256 feeAmount, address feeReceiver) private {
        if (feeAmount > 0) _send(msg.sender, paymentInfo.token, feeReceiver, feeAmount);
        if (amount > feeAmount) _send(msg.sender, paymentInfo.token, paymentInfo.receiver, amount - feeAmount);
    }

    /// @dev Pays from `operator`'s token store, creating the store the first time it pays anything.
    function _send(address operator, address token, address recipient, uint256 amount) private {
        address store = getTokenStore(operator);
        if (store.code.length == 0) {
            bytes memory initCode = _tokenStoreInitCode();
            bytes32 salt = _tokenStoreSalt(operator);
            address created;
            assembly ("memory-safe") {
                created := create2(0, add(initCode, 0x20), mload(initCode), salt)
            }
            require(created == store);
            emit TokenStoreCreated(operator, store);
        }
        TokenStore(store).sendTokens(token, recipient, amount);
    }

    /// @dev EIP-1167 minimal proxy creation code delegating to the token store implementation.
    function _tokenStoreInitCode() private view returns (bytes memory) {
        return abi.encodePacked(
            hex"3d602d80600a3d3981f3363d3d373d3d3d363d73", tokenStoreImplementation, hex"5af43d82803e903d91602b57fd5bf3"
        );
    }

    function _tokenStoreSalt(address operator) private pure returns (bytes32) {
        return bytes32(bytes20(operator));
    }
}
