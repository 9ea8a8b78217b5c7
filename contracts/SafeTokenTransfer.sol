// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/**
 * @title SafeTokenTransfer — ERC-20 `transfer` that also accepts tokens returning nothing
 * @notice Shared by the batch-settlement contract and its ERC-3009 collector. A failed transfer reverts with
 *   `SafeERC20FailedOperation(token)`, the error OpenZeppelin's SafeERC20 uses, so the reverts of our contracts
 *   read like the x402 project's.
 */
library SafeTokenTransfer {
    error SafeERC20FailedOperation(address token);

    function safeTransfer(address token, address to, uint256 amount) internal {
        (bool ok, bytes memory answer) = token.call(abi.encodeWithSelector(0xa9059cbb, to, amount));
        if (!ok || token.code.length == 0 || (answer.length != 0 && !abi.decode(answer, (bool)))) {
            revert SafeERC20FailedOperation(token);
        }
    }
}
