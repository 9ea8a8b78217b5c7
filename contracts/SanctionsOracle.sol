// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/**
 * @title SanctionsOracle: the interface of the sanctions oracle deployed on the main EVM chains
 * @notice `isSanctioned(address)` answers whether an address is on the list its owner keeps. agentgate's
 *   screening asks it before a payment moves (server/screening/oracle-source.ts). This is our own
 *   implementation of the published interface, for the dev chain only (server/dev/chain/sanctions-oracle.ts
 *   places it at the public oracle's address); on a real network the real oracle answers.
 *
 *   The owner is immutable (part of the runtime code), so the contract can be placed at any address with
 *   `anvil_setCode`: its constructor writes no storage.
 */
contract SanctionsOracle {
    address public immutable owner;
    mapping(address => bool) private sanctioned;

    event SanctionedAddressesAdded(address[] addrs);
    event SanctionedAddressesRemoved(address[] addrs);

    constructor(address owner_) {
        require(owner_ != address(0), "SanctionsOracle: owner is the zero address");
        owner = owner_;
    }

    modifier onlyOwner() {
        require(msg.sender == owner, "SanctionsOracle: caller is not the owner");
        _;
    }

    function addToSanctionsList(address[] calldata addrs) external onlyOwner {
        for (uint256 i = 0; i < addrs.length; i++) sanctioned[addrs[i]] = true;
        emit SanctionedAddressesAdded(addrs);
    }

    function removeFromSanctionsList(address[] calldata addrs) external onlyOwner {
        for (uint256 i = 0; i < addrs.length; i++) sanctioned[addrs[i]] = false;
        emit SanctionedAddressesRemoved(addrs);
    }

    function isSanctioned(address addr) external view returns (bool) {
        return sanctioned[addr];
    }

    function isSanctionedVerbose(address addr) external returns (bool) {
        return sanctioned[addr];
    }
}
