// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

import {Permit2} from "./Permit2.sol";
import {X402BasePermit2Proxy} from "./X402BasePermit2Proxy.sol";

/**
 * @title X402ExactPermit2Proxy — the x402 `exact` scheme's Permit2 settlement contract, for the dev chain only
 * @notice On real networks the x402 project's x402ExactPermit2Proxy is deployed at
 *   0x402085c248EeA27D92E8b30b2C58ed07f9E20001; this contract is placed at that address on anvil so that
 *   `exact` payments the official clients sign with `assetTransferMethod: "permit2"` settle locally. It
 *   implements the published interface (`settle` / `settleWithPermit`, the Witness struct, the witness
 *   type string and hash, the events and errors of the official ABI) and its rules:
 *   - the buyer signs a Permit2 PermitWitnessTransferFrom with this contract as spender and a witness
 *     naming the payee (`to`) and `validAfter`;
 *   - anyone may settle it, always for exactly the permitted amount, and the funds go to the witness's
 *     `to`: the witness is part of the signed message;
 *   - Permit2 enforces the deadline and the single use of the nonce.
 */
contract X402ExactPermit2Proxy is X402BasePermit2Proxy {
    string public constant WITNESS_TYPE_STRING =
        "Witness witness)TokenPermissions(address token,uint256 amount)Witness(address to,uint256 validAfter)";
    bytes32 public constant WITNESS_TYPEHASH = keccak256("Witness(address to,uint256 validAfter)");

    struct Witness {
        address to;
        uint256 validAfter;
    }

    /// @notice Moves the permitted amount from `owner` to `witness.to`.
    function settle(Permit2.PermitTransferFrom calldata permit, address owner, Witness calldata witness, bytes calldata signature) external nonReentrant {
        _settleExact(permit, owner, witness, signature);
        emit Settled();
    }

    /// @notice The same, after trying the buyer's EIP-2612 permit that lets Permit2 spend the token.
    function settleWithPermit(
        EIP2612Permit calldata permit2612,
        Permit2.PermitTransferFrom calldata permit,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) external nonReentrant {
        _executePermit(permit.permitted.token, owner, permit2612, permit.permitted.amount);
        _settleExact(permit, owner, witness, signature);
        emit SettledWithPermit();
    }

    function _settleExact(Permit2.PermitTransferFrom calldata permit, address owner, Witness calldata witness, bytes calldata signature) private {
        bytes32 witnessHash = keccak256(abi.encode(WITNESS_TYPEHASH, witness.to, witness.validAfter));
        _settle(permit, permit.permitted.amount, owner, witness.to, witness.validAfter, witnessHash, WITNESS_TYPE_STRING, signature);
    }
}
