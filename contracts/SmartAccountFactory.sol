// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

import {SmartAccount} from "./SmartAccount.sol";

/**
 * @title SmartAccountFactory — deploys SmartAccounts with CREATE2 at counterfactual addresses
 * @notice The address depends on (factory, owner, salt) only, so a wallet address can be handed out
 *   (and funded) before the account exists. `createAccount` is idempotent.
 */
contract SmartAccountFactory {
    event AccountCreated(address indexed account, address indexed owner, bytes32 salt);

    /// @notice Deploys the account for (owner, salt), or returns it if it already exists.
    function createAccount(address owner, bytes32 salt) external returns (address account) {
        account = getAddress(owner, salt);
        if (account.code.length > 0) return account;
        SmartAccount created = new SmartAccount{salt: salt}(owner);
        require(address(created) == account, "SmartAccountFactory: unexpected address");
        emit AccountCreated(account, owner, salt);
    }

    /// @notice The counterfactual address of the account for (owner, salt).
    function getAddress(address owner, bytes32 salt) public view returns (address) {
        bytes32 initCodeHash = keccak256(abi.encodePacked(type(SmartAccount).creationCode, abi.encode(owner)));
        return address(uint160(uint256(keccak256(abi.encodePacked(bytes1(0xff), address(this), salt, initCodeHash)))));
    }
}
