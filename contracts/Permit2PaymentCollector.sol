// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {AuthCaptureEscrow} from "./AuthCaptureEscrow.sol";
import {ERC6492SignatureHandler} from "./ERC6492SignatureHandler.sol";
import {TokenCollector} from "./TokenCollector.sol";

/// @dev The signature-transfer part of Uniswap's Permit2 that the collector calls.
interface ISignatureTransfer {
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

    function permitTransferFrom(
        PermitTransferFrom calldata permit,
        SignatureTransferDetails calldata transferDetails,
        address owner,
        bytes calldata signature
    ) external;
}

/**
 * @title Permit2PaymentCollector — collects a payment with the payer's Permit2 signature, for the dev chain only
 * @notice On Base (commerce-payments v1.1) at 0xD69831Aed5bfe262067ec4c751f4F830EcdD446e, the collector of
 *   x402's `auth-capture` with `assetTransferMethod: "permit2"` (any ERC-20 the payer approved to Permit2).
 *   The payer signs a PermitTransferFrom with this contract as spender, for the payment's maximum, with the
 *   payer-agnostic payment hash (as a number) as nonce and the pre-approval expiry as deadline; no
 *   witness: the nonce binds the payment. Permit2 moves the collected amount straight into the operator's
 *   token store. Written from the published interface, not copied.
 */
contract Permit2PaymentCollector is TokenCollector, ERC6492SignatureHandler {
    TokenCollector.CollectorType public constant override collectorType = TokenCollector.CollectorType.Payment;

    ISignatureTransfer public immutable permit2;

    constructor(address authCaptureEscrow_, address permit2_, address multicall3_)
        TokenCollector(authCaptureEscrow_)
        ERC6492SignatureHandler(multicall3_)
    {
        permit2 = ISignatureTransfer(permit2_);
    }

    function _collectTokens(
        AuthCaptureEscrow.PaymentInfo calldata paymentInfo,
        address tokenStore,
        uint256 amount,
        bytes calldata collectorData
    ) internal override {
        permit2.permitTransferFrom({
            permit: ISignatureTransfer.PermitTransferFrom({
                permitted: ISignatureTransfer.TokenPermissions({token: paymentInfo.token, amount: paymentInfo.maxAmount}),
                nonce: uint256(_payerAgnosticHash(paymentInfo)),
                deadline: paymentInfo.preApprovalExpiry
            }),
            transferDetails: ISignatureTransfer.SignatureTransferDetails({to: tokenStore, requestedAmount: amount}),
            owner: paymentInfo.payer,
            signature: _handleERC6492Signature(collectorData)
        });
    }
}
