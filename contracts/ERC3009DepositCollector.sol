// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {DepositCollector} from "./DepositCollector.sol";
import {SafeTokenTransfer} from "./SafeTokenTransfer.sol";

/// @dev EIP-3009 `receiveWithAuthorization` with a bytes signature (FiatTokenV2_2 has it; it also accepts
///      ERC-1271 signatures from contract wallets).
interface IERC3009Receive {
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
 * @title ERC3009DepositCollector — deposits into batch-settlement channels from an EIP-3009 authorization
 * @notice On real networks the x402 project's collector is deployed at 0x4020806089470a89826cB9fB1f4059150b550004;
 *   this one is placed there on the dev chain. The payer signs `ReceiveWithAuthorization` with this collector
 *   as `to` and the nonce `keccak256(abi.encode(channelId, salt))`, so the authorization is good for one
 *   channel only. `receiveWithAuthorization` requires the caller to be `to`, so the tokens land here and are
 *   passed on to the settlement contract in the same call.
 *
 *   collectorData = abi.encode(uint256 validAfter, uint256 validBefore, uint256 salt, bytes signature).
 */
contract ERC3009DepositCollector is DepositCollector {
    constructor(address settlement) DepositCollector(settlement) {}

    function collect(address payer, address token, uint256 amount, bytes32 channelId, bytes calldata collectorData)
        external
        onlyX402BatchSettlement
    {
        (uint256 validAfter, uint256 validBefore, uint256 salt, bytes memory signature) =
            abi.decode(collectorData, (uint256, uint256, uint256, bytes));
        bytes32 nonce = keccak256(abi.encode(channelId, salt));
        IERC3009Receive(token).receiveWithAuthorization(payer, address(this), amount, validAfter, validBefore, nonce, signature);
        SafeTokenTransfer.safeTransfer(token, x402BatchSettlement, amount);
    }
}
