// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "./IERC20.sol";

/// @title ERC-20 `transferFrom` that tolerates tokens returning nothing.
library SafeTransfer {
    /// @notice Calls `token.transferFrom(from, to, amount)` and reports whether it succeeded.
    /// @dev Success means the call did not revert and either returned a word equal to 1 (true), or returned
    ///      nothing from an address that has code (tokens that predate the boolean return value).
    function tryTransferFrom(address token, address from, address to, uint256 amount) internal returns (bool ok) {
        bytes memory data = abi.encodeCall(IERC20.transferFrom, (from, to, amount));
        assembly ("memory-safe") {
            // Only the first returned word is copied, into scratch space.
            ok := call(gas(), token, 0, add(data, 0x20), mload(data), 0x00, 0x20)
            switch returndatasize()
            case 0 { ok := and(ok, gt(extcodesize(token), 0)) }
            default { ok := and(ok, and(gt(returndatasize(), 31), eq(mload(0x00), 1))) }
        }
    }

    /// @notice Calls `token.transfer(to, amount)` and reports whether it succeeded, with the same rule.
    function tryTransfer(address token, address to, uint256 amount) internal returns (bool ok) {
        bytes memory data = abi.encodeCall(IERC20.transfer, (to, amount));
        assembly ("memory-safe") {
            ok := call(gas(), token, 0, add(data, 0x20), mload(data), 0x00, 0x20)
            switch returndatasize()
            case 0 { ok := and(ok, gt(extcodesize(token), 0)) }
            default { ok := and(ok, and(gt(returndatasize(), 31), eq(mload(0x00), 1))) }
        }
    }
}
