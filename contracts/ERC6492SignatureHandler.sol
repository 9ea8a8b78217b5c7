// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @dev The part of Multicall3 the handler uses.
interface IMulticall3 {
    struct Call {
        address target;
        bytes callData;
    }

    struct Result {
        bool success;
        bytes returnData;
    }

    function tryAggregate(bool requireSuccess, Call[] calldata calls) external payable returns (Result[] memory returnData);
}

/**
 * @title ERC6492SignatureHandler — lets a not-yet-deployed smart wallet pay (Commerce Payments interface)
 * @notice An ERC-6492 signature is `abi.encode(prepareTarget, prepareData, innerSignature)` followed by the
 *   32-byte magic suffix; the preparation call usually deploys the payer's wallet through its factory. The
 *   handler makes that call and hands the inner signature on, to be checked by the token or Permit2 (which
 *   ask the now deployed wallet through ERC-1271). It checks nothing itself. The call goes through the
 *   public Multicall3, never from the collector, so a payer cannot make the collector act on its behalf;
 *   its failure is ignored (the wallet may exist already), the signature check decides.
 *   Written from the published interface and ERC-6492, not copied.
 */
abstract contract ERC6492SignatureHandler {
    bytes32 private constant ERC6492_MAGIC_SUFFIX = 0x6492649264926492649264926492649264926492649264926492649264926492;

    IMulticall3 public immutable multicall3;

    constructor(address multicall3_) {
        multicall3 = IMulticall3(multicall3_);
    }

    /// @dev `signature` as it is, unless it is ERC-6492-wrapped: then the preparation call is made and the
    ///   inner signature returned.
    function _handleERC6492Signature(bytes calldata signature) internal returns (bytes memory) {
        uint256 length = signature.length;
        if (length < 32 || bytes32(signature[length - 32:]) != ERC6492_MAGIC_SUFFIX) return signature;
        (address prepareTarget, bytes memory prepareData, bytes memory innerSignature) =
            abi.decode(signature[:length - 32], (address, bytes, bytes));
        IMulticall3.Call[] memory calls = new IMulticall3.Call[](1);
        calls[0] = IMulticall3.Call({target: prepareTarget, callData: prepareData});
        multicall3.tryAggregate({requireSuccess: false, calls: calls});
        return innerSignature;
    }
}
