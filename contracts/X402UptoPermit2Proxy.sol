// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

import {Permit2} from "./Permit2.sol";
import {X402BasePermit2Proxy} from "./X402BasePermit2Proxy.sol";

/**
 * @title X402UptoPermit2Proxy — the x402 `upto` scheme's settlement contract, for the dev chain only
 * @notice On real networks the x402 project's x402UptoPermit2Proxy is deployed at
 *   0x4020A4f3b7b90ccA423B9fabCc0CE57C6C240002; this contract is placed at that address on anvil so that
 *   `upto` payments signed by the official clients settle locally. It implements the published interface
 *   (the `settle` / `settleWithPermit` functions, the Witness struct, the witness type string and hash,
 *   the events and errors of the official ABI) and its rules:
 *   - the buyer signs a Permit2 PermitWitnessTransferFrom with this contract as spender, for a maximum
 *     amount, and a witness naming the payee (`to`), the one facilitator that may settle, and `validAfter`;
 *   - only that facilitator (msg.sender) settles, for any amount up to the permitted one, and the funds go
 *     to the witness's `to`, whatever the caller wishes: the witness is part of the signed message;
 *   - Permit2 enforces the deadline and the single use of the nonce.
 *   The rules both x402 proxies share (zero amounts, owners and payees, validAfter, the EIP-2612 attempt)
 *   are in X402BasePermit2Proxy.sol.
 */
contract X402UptoPermit2Proxy is X402BasePermit2Proxy {
    string public constant WITNESS_TYPE_STRING =
        "Witness witness)TokenPermissions(address token,uint256 amount)Witness(address to,address facilitator,uint256 validAfter)";
    bytes32 public constant WITNESS_TYPEHASH = keccak256("Witness(address to,address facilitator,uint256 validAfter)");

    struct Witness {
        address to;
        address facilitator;
        uint256 validAfter;
    }

    error AmountExceedsPermitted();
    error UnauthorizedFacilitator();

    /// @notice Moves `amount` (at most the permitted maximum; more than zero) from `owner` to `witness.to`.
    function settle(
        Permit2.PermitTransferFrom calldata permit,
        uint256 amount,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) external nonReentrant {
        _checkCaller(permit, amount, witness);
        _settleUpto(permit, amount, owner, witness, signature);
        emit Settled();
    }

    /// @notice The same, after trying the buyer's EIP-2612 permit that lets Permit2 spend the token (a failed
    ///   permit is reported in an event and settlement goes on: an existing allowance may suffice).
    function settleWithPermit(
        EIP2612Permit calldata permit2612,
        Permit2.PermitTransferFrom calldata permit,
        uint256 amount,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) external nonReentrant {
        _checkCaller(permit, amount, witness);
        _executePermit(permit.permitted.token, owner, permit2612, permit.permitted.amount);
        _settleUpto(permit, amount, owner, witness, signature);
        emit SettledWithPermit();
    }

    function _checkCaller(Permit2.PermitTransferFrom calldata permit, uint256 amount, Witness calldata witness) private view {
        if (amount > permit.permitted.amount) revert AmountExceedsPermitted();
        if (msg.sender != witness.facilitator) revert UnauthorizedFacilitator();
    }

    /// @dev A zero charge reverts (InvalidAmount): it needs no transaction at all, and the facilitator never sends one.
    function _settleUpto(
        Permit2.PermitTransferFrom calldata permit,
        uint256 amount,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) private {
        bytes32 witnessHash = keccak256(abi.encode(WITNESS_TYPEHASH, witness.to, witness.facilitator, witness.validAfter));
        _settle(permit, amount, owner, witness.to, witness.validAfter, witnessHash, WITNESS_TYPE_STRING, signature);
    }
}
