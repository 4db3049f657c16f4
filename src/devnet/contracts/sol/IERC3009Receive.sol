// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title EIP-3009's `receiveWithAuthorization`, in the form that takes the signature as bytes (USDC v2.2).
interface IERC3009Receive {
    function receiveWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes calldata signature
    ) external;
}
