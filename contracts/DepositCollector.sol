// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/**
 * @title IDepositCollector — how X402BatchSettlement pulls a deposit from the payer
 * @notice `collect` moves exactly `amount` of `token` from `payer` to the caller (the settlement contract),
 *   using whatever authorization `collectorData` carries. The settlement contract checks its own token
 *   balance afterwards, so a collector that moves less is caught there.
 */
interface IDepositCollector {
    function collect(address payer, address token, uint256 amount, bytes32 channelId, bytes calldata collectorData) external;
}

/**
 * @title DepositCollector — base of the collectors: only the one settlement contract may call `collect`
 * @notice A collector holds the payer's signed authorization only for the length of a deposit. If anyone could
 *   call `collect`, anyone holding a payer's signature could pull the funds into escrow without crediting the
 *   channel the payer signed for; hence the caller check. The settlement address is a constructor argument
 *   (kept in an immutable, which is part of the runtime code, so the dev chain's copy at the canonical address
 *   keeps it).
 */
abstract contract DepositCollector is IDepositCollector {
    address public immutable x402BatchSettlement;

    error OnlyX402BatchSettlement();
    error InvalidX402BatchSettlementAddress();

    constructor(address settlement) {
        if (settlement == address(0)) revert InvalidX402BatchSettlementAddress();
        x402BatchSettlement = settlement;
    }

    modifier onlyX402BatchSettlement() {
        if (msg.sender != x402BatchSettlement) revert OnlyX402BatchSettlement();
        _;
    }
}
