// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {AuthCaptureEscrow} from "./AuthCaptureEscrow.sol";
import {ERC6492SignatureHandler} from "./ERC6492SignatureHandler.sol";
import {Permit2} from "./Permit2.sol";
import {TokenCollector} from "./TokenCollector.sol";

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

    Permit2 public immutable permit2;

    constructor(address authCaptureEscrow_, address permit2_, address multicall3_)
        TokenCollector(authCaptureEscrow_)
        ERC6492SignatureHandler(multicall3_)
    {
        permit2 = Permit2(permit2_);
    }

    function _collectTokens(
        AuthCaptureEscrow.PaymentInfo calldata paymentInfo,
        address tokenStore,
        uint256 amount,
        bytes calldata collectorData
    ) internal override {
        permit2.permitTransferFrom({
            permit: Permit2.PermitTransferFrom({
                permitted: Permit2.TokenPermissions({token: paymentInfo.token, amount: paymentInfo.maxAmount}),
                nonce: uint256(_payerAgnosticHash(paymentInfo)),
                deadline: paymentInfo.preApprovalExpiry
            }),
            transferDetails: Permit2.SignatureTransferDetails({to: tokenStore, requestedAmount: amount}),
            owner: paymentInfo.payer,
            signature: _handleERC6492Signature(collectorData)
        });
    }
}
