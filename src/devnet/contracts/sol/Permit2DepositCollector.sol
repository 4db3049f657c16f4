// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IDepositCollector} from "./IDepositCollector.sol";
import {IERC20Permit} from "./IERC20Permit.sol";
import {ISignatureTransfer} from "./ISignatureTransfer.sol";

/// @title Channel deposits by a Permit2 witness transfer (any ERC-20 the payer approved to Permit2).
/// @notice The payer signs a `PermitWitnessTransferFrom` whose spender is this collector and whose witness
///         `DepositWitness(bytes32 channelId)` names the channel; Permit2 moves the tokens straight to the
///         settlement contract. `data` is `abi.encode(uint256 nonce, uint256 deadline, bytes signature,
///         bytes eip2612Permit)`, where a non-empty `eip2612Permit` is `abi.encode(uint256 value,
///         uint256 deadline, uint8 v, bytes32 r, bytes32 s)` of an EIP-2612 approval of Permit2, tried first.
/// @dev Its runtime code is copied to the canonical address: no constructor, no immutables, no storage.
contract Permit2DepositCollector is IDepositCollector {
    /// @notice The canonical x402 batch settlement contract, the only caller allowed.
    address public constant SETTLEMENT = 0x4020074e9dF2ce1deE5A9C1b5c3f541D02a10003;

    ISignatureTransfer public constant PERMIT2 = ISignatureTransfer(0x000000000022D473030F116dDEE9F6B43aC78BA3);

    bytes32 public constant DEPOSIT_WITNESS_TYPEHASH = keccak256("DepositWitness(bytes32 channelId)");

    string public constant WITNESS_TYPE_STRING =
        "DepositWitness witness)DepositWitness(bytes32 channelId)TokenPermissions(address token,uint256 amount)";

    error OnlySettlement();

    function collect(address payer, address token, uint256 amount, bytes32 channelId, bytes calldata data) external {
        if (msg.sender != SETTLEMENT) revert OnlySettlement();
        (uint256 nonce, uint256 deadline, bytes memory signature, bytes memory eip2612Permit) =
            abi.decode(data, (uint256, uint256, bytes, bytes));
        if (eip2612Permit.length > 0) _tryPermit(payer, token, eip2612Permit);
        PERMIT2.permitWitnessTransferFrom(
            ISignatureTransfer.PermitTransferFrom({
                permitted: ISignatureTransfer.TokenPermissions({token: token, amount: amount}),
                nonce: nonce,
                deadline: deadline
            }),
            ISignatureTransfer.SignatureTransferDetails({to: msg.sender, requestedAmount: amount}),
            payer,
            keccak256(abi.encode(DEPOSIT_WITNESS_TYPEHASH, channelId)),
            WITNESS_TYPE_STRING,
            signature
        );
    }

    /// @dev A failed permit is ignored: someone may have submitted it already, and Permit2 fails anyway
    ///      when the allowance is missing.
    function _tryPermit(address payer, address token, bytes memory eip2612Permit) private {
        (uint256 value, uint256 permitDeadline, uint8 v, bytes32 r, bytes32 s) =
            abi.decode(eip2612Permit, (uint256, uint256, uint8, bytes32, bytes32));
        try IERC20Permit(token).permit(payer, address(PERMIT2), value, permitDeadline, v, r, s) {} catch {}
    }
}
