// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

import {Permit2} from "./Permit2.sol";

/// @dev EIP-2612 `permit` of the token (USDC has it).
interface IERC20PermitLike {
    function permit(address owner, address spender, uint256 value, uint256 deadline, uint8 v, bytes32 r, bytes32 s) external;
}

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
 *   Written from the interface, not copied: Permit2's address is a constant (the runtime code is copied to
 *   the canonical address, so constructor-set immutables would be lost).
 */
contract X402UptoPermit2Proxy {
    address private constant PERMIT2_ADDRESS = 0x000000000022D473030F116dDEE9F6B43aC78BA3;

    string public constant WITNESS_TYPE_STRING =
        "Witness witness)TokenPermissions(address token,uint256 amount)Witness(address to,address facilitator,uint256 validAfter)";
    bytes32 public constant WITNESS_TYPEHASH = keccak256("Witness(address to,address facilitator,uint256 validAfter)");

    struct Witness {
        address to;
        address facilitator;
        uint256 validAfter;
    }

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

    error AmountExceedsPermitted();
    error InvalidDestination();
    error InvalidOwner();
    error InvalidPermit2Address();
    error InvalidAmount();
    error PaymentTooEarly();
    error Permit2612AmountMismatch();
    error ReentrancyGuardReentrantCall();
    error UnauthorizedFacilitator();

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

    /// @notice Moves `amount` (at most the permitted maximum; more than zero) from `owner` to `witness.to`.
    function settle(
        Permit2.PermitTransferFrom calldata permit,
        uint256 amount,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) external nonReentrant {
        _checkCaller(permit, amount, witness);
        _settle(permit, amount, owner, witness, signature);
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
        if (permit2612.value != permit.permitted.amount) revert Permit2612AmountMismatch();
        address token = permit.permitted.token;
        try IERC20PermitLike(token).permit(owner, PERMIT2_ADDRESS, permit2612.value, permit2612.deadline, permit2612.v, permit2612.r, permit2612.s) {
        } catch Error(string memory reason) {
            emit EIP2612PermitFailedWithReason(token, owner, reason);
        } catch Panic(uint256 errorCode) {
            emit EIP2612PermitFailedWithPanic(token, owner, errorCode);
        } catch (bytes memory data) {
            emit EIP2612PermitFailedWithData(token, owner, data);
        }
        _settle(permit, amount, owner, witness, signature);
        emit SettledWithPermit();
    }

    function _checkCaller(Permit2.PermitTransferFrom calldata permit, uint256 amount, Witness calldata witness) private view {
        if (amount > permit.permitted.amount) revert AmountExceedsPermitted();
        if (msg.sender != witness.facilitator) revert UnauthorizedFacilitator();
    }

    function _settle(
        Permit2.PermitTransferFrom calldata permit,
        uint256 amount,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) private {
        // A zero charge needs no transaction at all (the scheme says so): the facilitator never sends one.
        if (amount == 0) revert InvalidAmount();
        if (owner == address(0)) revert InvalidOwner();
        if (witness.to == address(0)) revert InvalidDestination();
        if (block.timestamp < witness.validAfter) revert PaymentTooEarly();
        bytes32 witnessHash = keccak256(abi.encode(WITNESS_TYPEHASH, witness.to, witness.facilitator, witness.validAfter));
        Permit2(PERMIT2_ADDRESS).permitWitnessTransferFrom(
            permit,
            Permit2.SignatureTransferDetails({to: witness.to, requestedAmount: amount}),
            owner,
            witnessHash,
            WITNESS_TYPE_STRING,
            signature
        );
    }
}
