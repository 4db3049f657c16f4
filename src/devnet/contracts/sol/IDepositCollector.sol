// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title How the settlement contract pulls a channel deposit from its payer.
/// @notice A collector moves exactly `amount` of `token` from `payer` to the caller (the settlement contract),
///         using an authorization the payer signed for `channelId`; `data` carries that authorization in the
///         collector's own encoding. Collectors accept calls from the canonical settlement contract only.
interface IDepositCollector {
    function collect(address payer, address token, uint256 amount, bytes32 channelId, bytes calldata data) external;
}
