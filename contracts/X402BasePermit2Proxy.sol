// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

import {Permit2} from "./Permit2.sol";

/// @dev EIP-2612 `permit` of the token (USDC has it).
interface IERC20PermitLike {
    function permit(address owner, address spender, uint256 value, uint256 deadline, uint8 v, bytes32 r, bytes32 s) external;
}

/**
 * @title X402BasePermit2Proxy — what the x402 Permit2 proxies share, for the dev chain only
 * @notice The published x402 proxies (x402ExactPermit2Proxy, x402UptoPermit2Proxy) derive from one base
 *   with the same rules, events and errors; so do our own implementations of them. Written from the
 *   published interface, not copied: the proxy is the Permit2 spender the buyer signs for, and a witness
 *   binds the payee; zero amounts, owners and payees are refused; nothing moves before `validAfter`; a
 *   failed EIP-2612 permit is reported in an event and settlement goes on (an allowance may exist).
 *   Permit2's address is a constant (the runtime code is copied to the canonical address, so
 *   constructor-set immutables would be lost).
 */
abstract contract X402BasePermit2Proxy {
    address internal constant PERMIT2_ADDRESS = 0x000000000022D473030F116dDEE9F6B43aC78BA3;

    struct EIP2612Permit {
        uint256 value;
        uint256 deadline;
        bytes32 r;
        bytes32 s;
        uint8 v;
    }

    event Settled();
    event SettledWithPermit();
    event EIP2612PermitFailedWithReason(address indexed token, address indexed owner, string reason);
    event EIP2612PermitFailedWithPanic(address indexed token, address indexed owner, uint256 errorCode);
    event EIP2612PermitFailedWithData(address indexed token, address indexed owner, bytes data);

    error InvalidDestination();
    error InvalidOwner();
    error InvalidPermit2Address();
    error InvalidAmount();
    error PaymentTooEarly();
    error Permit2612AmountMismatch();
    error ReentrancyGuardReentrantCall();

    /// @dev 1 = not entered, 2 = entered; 0 (fresh storage at the copied address) also counts as not entered.
    uint256 private entered;

    modifier nonReentrant() {
        if (entered == 2) revert ReentrancyGuardReentrantCall();
        entered = 2;
        _;
        entered = 1;
    }

    function PERMIT2() external pure returns (address) {
        return PERMIT2_ADDRESS;
    }

    /// @dev The buyer's EIP-2612 permit letting Permit2 spend exactly the permitted amount, tried once.
    function _executePermit(address token, address owner, EIP2612Permit calldata permit2612, uint256 permittedAmount) internal {
        if (permit2612.value != permittedAmount) revert Permit2612AmountMismatch();
        try IERC20PermitLike(token).permit(owner, PERMIT2_ADDRESS, permit2612.value, permit2612.deadline, permit2612.v, permit2612.r, permit2612.s) {
        } catch Error(string memory reason) {
            emit EIP2612PermitFailedWithReason(token, owner, reason);
        } catch Panic(uint256 errorCode) {
            emit EIP2612PermitFailedWithPanic(token, owner, errorCode);
        } catch (bytes memory data) {
            emit EIP2612PermitFailedWithData(token, owner, data);
        }
    }

    /// @dev Moves `amount` from `owner` to `to` through Permit2's witness transfer of the signed permit.
    function _settle(
        Permit2.PermitTransferFrom calldata permit,
        uint256 amount,
        address owner,
        address to,
        uint256 validAfter,
        bytes32 witnessHash,
        string memory witnessTypeString,
        bytes calldata signature
    ) internal {
        if (amount == 0) revert InvalidAmount();
        if (owner == address(0)) revert InvalidOwner();
        if (to == address(0)) revert InvalidDestination();
        if (block.timestamp < validAfter) revert PaymentTooEarly();
        Permit2(PERMIT2_ADDRESS).permitWitnessTransferFrom(
            permit,
            Permit2.SignatureTransferDetails({to: to, requestedAmount: amount}),
            owner,
            witnessHash,
            witnessTypeString,
            signature
        );
    }
}
