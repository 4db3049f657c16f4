// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IDepositCollector} from "./IDepositCollector.sol";
import {IERC3009Receive} from "./IERC3009Receive.sol";
import {SafeTransfer} from "./SafeTransfer.sol";

/// @title Channel deposits by EIP-3009 `receiveWithAuthorization` (USDC and other EIP-3009 tokens).
/// @notice The payer signs a `ReceiveWithAuthorization` to this collector whose nonce is
///         `keccak256(abi.encode(channelId, salt))`, so the authorization can fund that channel only. The
///         collector receives the tokens and hands them on to the settlement contract in the same call.
///         `data` is `abi.encode(uint256 validAfter, uint256 validBefore, uint256 salt, bytes signature)`.
/// @dev Its runtime code is copied to the canonical address: no constructor, no immutables, no storage.
contract ERC3009DepositCollector is IDepositCollector {
    /// @notice The canonical x402 batch settlement contract, the only caller allowed.
    address public constant SETTLEMENT = 0x4020074e9dF2ce1deE5A9C1b5c3f541D02a10003;

    error OnlySettlement();
    error TransferFailed();

    function collect(address payer, address token, uint256 amount, bytes32 channelId, bytes calldata data) external {
        if (msg.sender != SETTLEMENT) revert OnlySettlement();
        (uint256 validAfter, uint256 validBefore, uint256 salt, bytes memory signature) =
            abi.decode(data, (uint256, uint256, uint256, bytes));
        bytes32 nonce = keccak256(abi.encode(channelId, salt));
        IERC3009Receive(token).receiveWithAuthorization(
            payer, address(this), amount, validAfter, validBefore, nonce, signature
        );
        if (!SafeTransfer.tryTransfer(token, msg.sender, amount)) revert TransferFailed();
    }
}
