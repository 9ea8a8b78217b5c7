// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/**
 * @title TokenTransfers — ERC-20 calls that tolerate tokens returning nothing, for the escrow contracts
 * @notice Behaves as OpenZeppelin's SafeERC20, which the published Commerce Payments contracts use: a
 *   token's own revert is passed on as is, a `false` answer (or a call to an address without code) becomes
 *   `SafeERC20FailedOperation(token)`. Written for this project, not copied.
 */
library TokenTransfers {
    error SafeERC20FailedOperation(address token);

    function safeTransfer(address token, address to, uint256 amount) internal {
        _call(token, abi.encodeWithSelector(0xa9059cbb, to, amount)); // transfer(address,uint256)
    }

    function safeTransferFrom(address token, address from, address to, uint256 amount) internal {
        _call(token, abi.encodeWithSelector(0x23b872dd, from, to, amount)); // transferFrom(address,address,uint256)
    }

    function balanceOf(address token, address account) internal view returns (uint256) {
        (bool ok, bytes memory answer) = token.staticcall(abi.encodeWithSelector(0x70a08231, account)); // balanceOf(address)
        if (!ok || answer.length < 32) revert SafeERC20FailedOperation(token);
        return abi.decode(answer, (uint256));
    }

    function _call(address token, bytes memory data) private {
        (bool ok, bytes memory answer) = token.call(data);
        if (!ok) {
            assembly ("memory-safe") {
                revert(add(answer, 0x20), mload(answer))
            }
        }
        bool refused = answer.length == 0 ? token.code.length == 0 : !abi.decode(answer, (bool));
        if (refused) revert SafeERC20FailedOperation(token);
    }
}
