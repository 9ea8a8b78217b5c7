// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {TokenTransfers} from "./TokenTransfers.sol";

/**
 * @title TokenStore — where one operator's escrowed payments are held, for the dev chain only
 * @notice Commerce Payments keeps each operator's funds apart: the escrow deploys one store per operator
 *   (a minimal proxy to this contract, at a CREATE2 address derived from the operator) and only the escrow
 *   may move money out of it. Written from the published interface, not copied.
 */
contract TokenStore {
    /// @notice The escrow that created this store and alone may spend from it.
    address public immutable authCaptureEscrow;

    error OnlyAuthCaptureEscrow();

    constructor(address authCaptureEscrow_) {
        authCaptureEscrow = authCaptureEscrow_;
    }

    /// @notice Sends `amount` of `token` to `recipient` (captures, voids, reclaims, refunds).
    function sendTokens(address token, address recipient, uint256 amount) external returns (bool) {
        if (msg.sender != authCaptureEscrow) revert OnlyAuthCaptureEscrow();
        TokenTransfers.safeTransfer(token, recipient, amount);
        return true;
    }
}
