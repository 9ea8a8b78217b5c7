// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {DepositCollector} from "./DepositCollector.sol";
import {Permit2} from "./Permit2.sol";

/// @dev EIP-2612 `permit` of the token (USDC has it).
interface IERC20PermitLike {
    function permit(address owner, address spender, uint256 value, uint256 deadline, uint8 v, bytes32 r, bytes32 s) external;
}

/**
 * @title Permit2DepositCollector — deposits into batch-settlement channels from a Permit2 signature
 * @notice On real networks the x402 project's collector is deployed at 0x4020425FAf3B746C082C2f942b4E5159887B0005;
 *   this one is placed there on the dev chain. The payer signs Permit2's `PermitWitnessTransferFrom` with this
 *   collector as spender, for the deposit's token and exact amount, and the witness `DepositWitness(bytes32
 *   channelId)`: the signature is good for one channel only. Permit2 moves the tokens straight from the payer
 *   to the settlement contract, and enforces the deadline and the single use of the nonce.
 *
 *   Works for any ERC-20 the payer has approved Permit2 for. For a token with EIP-2612, the payer may instead
 *   sign a `permit` for Permit2, carried in `eip2612PermitData`; it is tried first, and a failure is reported in
 *   an event and the deposit goes on (an existing allowance may suffice, or Permit2 reverts).
 *
 *   collectorData = abi.encode(uint256 nonce, uint256 deadline, bytes permit2Signature, bytes eip2612PermitData),
 *   eip2612PermitData = empty, or abi.encode(uint256 value, uint256 deadline, uint8 v, bytes32 r, bytes32 s).
 */
contract Permit2DepositCollector is DepositCollector {
    Permit2 public immutable PERMIT2;

    /// @dev Permit2 appends this to its `PermitWitnessTransferFrom(...,` stub. Referenced types in EIP-712's
    ///      order (alphabetical), as wallets and viem encode them.
    string public constant DEPOSIT_WITNESS_TYPE_STRING =
        "DepositWitness witness)DepositWitness(bytes32 channelId)TokenPermissions(address token,uint256 amount)";
    bytes32 public constant DEPOSIT_WITNESS_TYPEHASH = keccak256("DepositWitness(bytes32 channelId)");

    error InvalidPermit2Address();
    error Permit2612AmountMismatch();

    event EIP2612PermitFailedWithReason(address indexed token, address indexed owner, string reason);
    event EIP2612PermitFailedWithPanic(address indexed token, address indexed owner, uint256 errorCode);
    event EIP2612PermitFailedWithData(address indexed token, address indexed owner, bytes data);

    constructor(address settlement, address permit2) DepositCollector(settlement) {
        if (permit2 == address(0)) revert InvalidPermit2Address();
        PERMIT2 = Permit2(permit2);
    }

    function collect(address payer, address token, uint256 amount, bytes32 channelId, bytes calldata collectorData)
        external
        onlyX402BatchSettlement
    {
        (uint256 nonce, uint256 deadline, bytes memory signature, bytes memory eip2612PermitData) =
            abi.decode(collectorData, (uint256, uint256, bytes, bytes));
        if (eip2612PermitData.length > 0) _tryPermit(payer, token, amount, eip2612PermitData);
        PERMIT2.permitWitnessTransferFrom(
            Permit2.PermitTransferFrom({permitted: Permit2.TokenPermissions({token: token, amount: amount}), nonce: nonce, deadline: deadline}),
            Permit2.SignatureTransferDetails({to: x402BatchSettlement, requestedAmount: amount}),
            payer,
            keccak256(abi.encode(DEPOSIT_WITNESS_TYPEHASH, channelId)),
            DEPOSIT_WITNESS_TYPE_STRING,
            signature
        );
    }

    function _tryPermit(address payer, address token, uint256 amount, bytes memory eip2612PermitData) private {
        (uint256 value, uint256 permitDeadline, uint8 v, bytes32 r, bytes32 s) =
            abi.decode(eip2612PermitData, (uint256, uint256, uint8, bytes32, bytes32));
        if (value != amount) revert Permit2612AmountMismatch();
        try IERC20PermitLike(token).permit(payer, address(PERMIT2), value, permitDeadline, v, r, s) {
        } catch Error(string memory reason) {
            emit EIP2612PermitFailedWithReason(token, payer, reason);
        } catch Panic(uint256 errorCode) {
            emit EIP2612PermitFailedWithPanic(token, payer, errorCode);
        } catch (bytes memory data) {
            emit EIP2612PermitFailedWithData(token, payer, data);
        }
    }
}
