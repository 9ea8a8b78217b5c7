// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {AuthCaptureEscrow} from "./AuthCaptureEscrow.sol";
import {TokenCollector} from "./TokenCollector.sol";
import {TokenTransfers} from "./TokenTransfers.sol";

/**
 * @title OperatorRefundCollector — funds a refund from the operator's allowance, for the dev chain only
 * @notice On Base (commerce-payments v1.1) at 0x7a03443724d14798c4AB4622F1DAAcA761Fea486, the refund
 *   collector x402's `auth-capture` scheme relays refunds through. A captured payment has left the escrow,
 *   so its refund needs fresh money: this collector takes it from `paymentInfo.operator`, who must have
 *   approved this contract on the token. Only the operator can start a refund (the escrow checks the
 *   sender), so no further authorization is needed. Written from the published interface, not copied.
 */
contract OperatorRefundCollector is TokenCollector {
    TokenCollector.CollectorType public constant override collectorType = TokenCollector.CollectorType.Refund;

    constructor(address authCaptureEscrow_) TokenCollector(authCaptureEscrow_) {}

    function _collectTokens(AuthCaptureEscrow.PaymentInfo calldata paymentInfo, address tokenStore, uint256 amount, bytes calldata)
        internal
        override
    {
        TokenTransfers.safeTransferFrom(paymentInfo.token, paymentInfo.operator, tokenStore, amount);
    }
}
