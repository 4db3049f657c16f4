// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title Several calls in one transaction, each allowed to fail on its own.
/// @notice Answers Multicall3's `aggregate3(Call3[])` with the same types, so the devnet places it at Multicall3's
///         canonical address, where Base and Base Sepolia have Multicall3 itself. The settlement engine sends a
///         batch of payments through it: a call marked `allowFailure` that reverts undoes only its own effects,
///         and its entry in the results says so.
/// @dev Its runtime code is copied to the canonical address, so it has no constructor, no immutables and no
///      storage. It holds nothing: it takes no value, and each call runs with this contract as the caller.
contract Multicall {
    struct Call3 {
        address target;
        bool allowFailure;
        bytes callData;
    }

    struct Call {
        address target;
        bytes callData;
    }

    struct Result {
        bool success;
        bytes returnData;
    }

    /// @notice Call `index` reverted and was not allowed to; `reason` is its revert data.
    error CallReverted(uint256 index, bytes reason);

    /// @notice Makes every call in order; reverts the whole batch only for a failing call without `allowFailure`.
    function aggregate3(Call3[] calldata calls) external returns (Result[] memory results) {
        uint256 count = calls.length;
        results = new Result[](count);
        for (uint256 i = 0; i < count; ++i) {
            Call3 calldata item = calls[i];
            (bool success, bytes memory returned) = item.target.call(item.callData);
            if (!success && !item.allowFailure) revert CallReverted(i, returned);
            results[i] = Result({success: success, returnData: returned});
        }
    }

    /// @notice Multicall3's `tryAggregate`: every call in order, each with this contract as the caller; with
    ///         `requireSuccess` a failing call reverts the batch. Official x402 facilitators read channel state
    ///         through it.
    function tryAggregate(bool requireSuccess, Call[] calldata calls) external returns (Result[] memory results) {
        uint256 count = calls.length;
        results = new Result[](count);
        for (uint256 i = 0; i < count; ++i) {
            (bool success, bytes memory returned) = calls[i].target.call(calls[i].callData);
            if (!success && requireSuccess) revert CallReverted(i, returned);
            results[i] = Result({success: success, returnData: returned});
        }
    }
}
