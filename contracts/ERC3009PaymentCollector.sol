// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {AuthCaptureEscrow} from "./AuthCaptureEscrow.sol";
import {ERC6492SignatureHandler} from "./ERC6492SignatureHandler.sol";
import {TokenCollector} from "./TokenCollector.sol";
import {TokenTransfers} from "./TokenTransfers.sol";

/// @dev ERC-3009's receiveWithAuthorization, the `bytes signature` form (USDC v2.2 has it; it accepts
///   65-byte ECDSA signatures and ERC-1271 answers from contract wallets).
interface IERC3009 {
    function receiveWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes memory signature
    ) external;
}

/**
 * @title ERC3009PaymentCollector — collects a payment with the payer's ERC-3009 signature, for the dev chain only
 * @notice On Base (commerce-payments v1.1) at 0x8612dfdc421f80336cd14E8EF9cb1E765dB5ab88, the collector x402's
 *   `auth-capture` scheme names by default (`assetTransferMethod: "eip3009"`). The payer signs a
 *   ReceiveWithAuthorization to this contract for the payment's maximum, valid from 0 until the
 *   pre-approval expiry, with the payer-agnostic payment hash as nonce: the signature therefore commits to
 *   every field of the payment (receiver, operator, expiries, fees, salt) and to this escrow and chain.
 *   The collector receives the maximum, returns what the operator does not take, and forwards the rest to
 *   the operator's token store. Written from the published interface, not copied.
 */
contract ERC3009PaymentCollector is TokenCollector, ERC6492SignatureHandler {
    TokenCollector.CollectorType public constant override collectorType = TokenCollector.CollectorType.Payment;

    constructor(address authCaptureEscrow_, address multicall3_)
        TokenCollector(authCaptureEscrow_)
        ERC6492SignatureHandler(multicall3_)
    {}

    function _collectTokens(
        AuthCaptureEscrow.PaymentInfo calldata paymentInfo,
        address tokenStore,
        uint256 amount,
        bytes calldata collectorData
    ) internal override {
        address token = paymentInfo.token;
        uint256 signedAmount = paymentInfo.maxAmount;
        IERC3009(token).receiveWithAuthorization({
            from: paymentInfo.payer,
            to: address(this),
            value: signedAmount,
            validAfter: 0,
            validBefore: paymentInfo.preApprovalExpiry,
            nonce: _payerAgnosticHash(paymentInfo),
            signature: _handleERC6492Signature(collectorData)
        });
        // ERC-3009 moves exactly the signed value, so whatever the operator does not collect goes back.
        if (signedAmount > amount) TokenTransfers.safeTransfer(token, paymentInfo.payer, signedAmount - amount);
        TokenTransfers.safeTransfer(token, tokenStore, amount);
    }
}
