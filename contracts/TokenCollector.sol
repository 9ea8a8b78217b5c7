// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {AuthCaptureEscrow} from "./AuthCaptureEscrow.sol";

/**
 * @title TokenCollector — what the escrow asks of a token collector (Commerce Payments interface)
 * @notice A collector turns one kind of authorization (an ERC-3009 signature, a Permit2 permit, an
 *   operator's allowance) into tokens in the operator's token store. Only the escrow may call it, and the
 *   escrow checks the store's balance afterwards, so a collector can move no more and no less than asked.
 *   Written from the published interface, not copied.
 */
abstract contract TokenCollector {
    /// @notice Payment collectors fund authorize and charge; refund collectors fund refund.
    enum CollectorType {
        Payment,
        Refund
    }

    AuthCaptureEscrow public immutable authCaptureEscrow;

    error OnlyAuthCaptureEscrow();

    constructor(address authCaptureEscrow_) {
        authCaptureEscrow = AuthCaptureEscrow(authCaptureEscrow_);
    }

    /// @notice Brings `amount` of the payment's token into `tokenStore`.
    function collectTokens(
        AuthCaptureEscrow.PaymentInfo calldata paymentInfo,
        address tokenStore,
        uint256 amount,
        bytes calldata collectorData
    ) external {
        if (msg.sender != address(authCaptureEscrow)) revert OnlyAuthCaptureEscrow();
        _collectTokens(paymentInfo, tokenStore, amount, collectorData);
    }

    function collectorType() external view virtual returns (CollectorType);

    function _collectTokens(
        AuthCaptureEscrow.PaymentInfo calldata paymentInfo,
        address tokenStore,
        uint256 amount,
        bytes calldata collectorData
    ) internal virtual;

    /// @dev The nonce the payer signs: the escrow's hash of the payment with the payer left out (zero), so
    ///   the signature can be made before anyone knows which address will pay (x402: "payer-agnostic").
    function _payerAgnosticHash(AuthCaptureEscrow.PaymentInfo calldata paymentInfo) internal view returns (bytes32) {
        AuthCaptureEscrow.PaymentInfo memory withoutPayer = paymentInfo;
        withoutPayer.payer = address(0);
        return authCaptureEscrow.getHash(withoutPayer);
    }
}
