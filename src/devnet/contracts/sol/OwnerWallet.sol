// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC1271} from "./IERC1271.sol";

/// @notice A minimal contract wallet for the devnet and tests: it vouches (ERC-1271) for any digest its owner
/// signed, so payments from smart-contract wallets can be exercised end to end.
contract OwnerWallet is IERC1271 {
    address public immutable owner;

    error InvalidOwner();

    constructor(address owner_) {
        if (owner_ == address(0)) revert InvalidOwner();
        owner = owner_;
    }

    function isValidSignature(bytes32 hash, bytes calldata signature) external view returns (bytes4) {
        if (signature.length != 65) return 0xffffffff;
        bytes32 r = bytes32(signature[0:32]);
        bytes32 s = bytes32(signature[32:64]);
        uint8 v = uint8(signature[64]);
        if (v < 27) v += 27;
        // Low-s only, as wallets produce: the other half of the curve would make signatures malleable.
        if (uint256(s) > 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0) return 0xffffffff;
        address signer = ecrecover(hash, v, r, s);
        return signer != address(0) && signer == owner ? IERC1271.isValidSignature.selector : bytes4(0xffffffff);
    }
}
