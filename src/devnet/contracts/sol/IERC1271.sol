// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title The EIP-1271 contract-signature interface.
/// @dev A valid signature makes `isValidSignature` return its own selector, 0x1626ba7e.
interface IERC1271 {
    function isValidSignature(bytes32 hash, bytes memory signature) external view returns (bytes4 magicValue);
}
