// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC1271} from "./IERC1271.sol";

/// @title Signature verification for externally owned accounts (ECDSA) and contract accounts (EIP-1271).
/// @notice ECDSA signatures are accepted as 65 bytes (r ‖ s ‖ v) or as 64-byte EIP-2098 compact
///         signatures (r ‖ yParity·2^255 + s). Only canonical signatures pass: s in the lower half of
///         the curve order and v in {27, 28}.
library SignatureChecker {
    /// @dev Why a signature could not be turned into a signer.
    enum RecoverStatus {
        Ok,
        InvalidLength,
        InvalidSignature
    }

    /// @dev secp256k1n / 2: the largest s a canonical (EIP-2) signature may carry.
    uint256 private constant MAX_CANONICAL_S = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0;

    /// @dev Clears the parity bit of an EIP-2098 `vs` word.
    uint256 private constant COMPACT_S_MASK = 0x7fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff;

    /// @dev `IERC1271.isValidSignature.selector`.
    bytes4 internal constant ERC1271_MAGIC_VALUE = 0x1626ba7e;

    /// @notice The signer of `digest`, or the zero address when (v, r, s) is not a canonical signature.
    function recover(bytes32 digest, uint8 v, bytes32 r, bytes32 s) internal pure returns (address) {
        if (uint256(s) > MAX_CANONICAL_S) return address(0);
        if (v != 27 && v != 28) return address(0);
        return ecrecover(digest, v, r, s);
    }

    /// @notice Splits a 65-byte or 64-byte signature and recovers its signer.
    function tryRecover(bytes32 digest, bytes memory signature)
        internal
        pure
        returns (address signer, RecoverStatus status)
    {
        bytes32 r;
        bytes32 s;
        uint8 v;
        if (signature.length == 65) {
            assembly ("memory-safe") {
                r := mload(add(signature, 0x20))
                s := mload(add(signature, 0x40))
                v := byte(0, mload(add(signature, 0x60)))
            }
        } else if (signature.length == 64) {
            uint256 vs;
            assembly ("memory-safe") {
                r := mload(add(signature, 0x20))
                vs := mload(add(signature, 0x40))
            }
            s = bytes32(vs & COMPACT_S_MASK);
            v = uint8(vs >> 255) + 27;
        } else {
            return (address(0), RecoverStatus.InvalidLength);
        }
        signer = recover(digest, v, r, s);
        status = signer == address(0) ? RecoverStatus.InvalidSignature : RecoverStatus.Ok;
    }

    /// @notice Whether `account` is a contract that approves `signature` over `digest` through EIP-1271.
    /// @dev A reverting, silent or non-conforming account counts as a refusal.
    function isValidERC1271SignatureNow(address account, bytes32 digest, bytes memory signature)
        internal
        view
        returns (bool)
    {
        if (account.code.length == 0) return false;
        (bool success, bytes memory result) =
            account.staticcall(abi.encodeCall(IERC1271.isValidSignature, (digest, signature)));
        return success && result.length >= 32 && abi.decode(result, (bytes32)) == bytes32(ERC1271_MAGIC_VALUE);
    }

    /// @notice Whether `signature` over `digest` was made by `signer`.
    /// @dev ECDSA is tried first, so an account with code whose key still signs (an EIP-7702 delegated
    ///      account) is accepted like any other account; otherwise an account with code is asked through
    ///      EIP-1271.
    function isValidSignatureNow(address signer, bytes32 digest, bytes memory signature)
        internal
        view
        returns (bool)
    {
        if (signer == address(0)) return false;
        (address recovered, RecoverStatus status) = tryRecover(digest, signature);
        if (status == RecoverStatus.Ok && recovered == signer) return true;
        return isValidERC1271SignatureNow(signer, digest, signature);
    }
}
