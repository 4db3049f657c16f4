// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {EIP712} from "./EIP712.sol";
import {Erc20} from "./Erc20.sol";
import {SignatureChecker} from "./SignatureChecker.sol";

/// @title EIP-3009 transfers by signed authorization.
/// @notice Each authorization carries a random 32-byte nonce that can be used (or canceled) once per
///         authorizer. Signatures may be 65-byte or 64-byte ECDSA, or EIP-1271 when the authorizer is a
///         contract; the (v, r, s) forms are handed to the contract as the 65 bytes r ‖ s ‖ v.
///         Revert reasons are plain strings so a facilitator can tell why a settlement failed.
abstract contract Erc3009 is Erc20, EIP712 {
    bytes32 public constant TRANSFER_WITH_AUTHORIZATION_TYPEHASH = keccak256(
        "TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)"
    );
    bytes32 public constant RECEIVE_WITH_AUTHORIZATION_TYPEHASH = keccak256(
        "ReceiveWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)"
    );
    bytes32 public constant CANCEL_AUTHORIZATION_TYPEHASH =
        keccak256("CancelAuthorization(address authorizer,bytes32 nonce)");

    mapping(address authorizer => mapping(bytes32 nonce => bool)) private _authorizationStates;

    event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce);
    event AuthorizationCanceled(address indexed authorizer, bytes32 indexed nonce);

    /// @dev The fields shared by transfer and receive authorizations.
    struct Authorization {
        address from;
        address to;
        uint256 value;
        uint256 validAfter;
        uint256 validBefore;
        bytes32 nonce;
    }

    /// @notice Whether `nonce` has been used or canceled by `authorizer`.
    function authorizationState(address authorizer, bytes32 nonce) external view returns (bool) {
        return _authorizationStates[authorizer][nonce];
    }

    function transferWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external {
        _useAuthorization(
            TRANSFER_WITH_AUTHORIZATION_TYPEHASH,
            Authorization(from, to, value, validAfter, validBefore, nonce),
            abi.encodePacked(r, s, v)
        );
    }

    function transferWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes calldata signature
    ) external {
        _useAuthorization(
            TRANSFER_WITH_AUTHORIZATION_TYPEHASH,
            Authorization(from, to, value, validAfter, validBefore, nonce),
            signature
        );
    }

    function receiveWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external {
        require(to == msg.sender, "EIP3009: caller must be the payee");
        _useAuthorization(
            RECEIVE_WITH_AUTHORIZATION_TYPEHASH,
            Authorization(from, to, value, validAfter, validBefore, nonce),
            abi.encodePacked(r, s, v)
        );
    }

    function receiveWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes calldata signature
    ) external {
        require(to == msg.sender, "EIP3009: caller must be the payee");
        _useAuthorization(
            RECEIVE_WITH_AUTHORIZATION_TYPEHASH,
            Authorization(from, to, value, validAfter, validBefore, nonce),
            signature
        );
    }

    function cancelAuthorization(address authorizer, bytes32 nonce, uint8 v, bytes32 r, bytes32 s) external {
        _cancelAuthorization(authorizer, nonce, abi.encodePacked(r, s, v));
    }

    function cancelAuthorization(address authorizer, bytes32 nonce, bytes calldata signature) external {
        _cancelAuthorization(authorizer, nonce, signature);
    }

    function _useAuthorization(bytes32 typeHash, Authorization memory auth, bytes memory signature) private {
        require(block.timestamp > auth.validAfter, "EIP3009: authorization is not yet valid");
        require(block.timestamp < auth.validBefore, "EIP3009: authorization is expired");
        _requireUnused(auth.from, auth.nonce);
        bytes32 structHash = keccak256(
            abi.encode(typeHash, auth.from, auth.to, auth.value, auth.validAfter, auth.validBefore, auth.nonce)
        );
        _requireSignedBy(auth.from, structHash, signature);
        _authorizationStates[auth.from][auth.nonce] = true;
        emit AuthorizationUsed(auth.from, auth.nonce);
        _transfer(auth.from, auth.to, auth.value);
    }

    function _cancelAuthorization(address authorizer, bytes32 nonce, bytes memory signature) private {
        _requireUnused(authorizer, nonce);
        _requireSignedBy(authorizer, keccak256(abi.encode(CANCEL_AUTHORIZATION_TYPEHASH, authorizer, nonce)), signature);
        _authorizationStates[authorizer][nonce] = true;
        emit AuthorizationCanceled(authorizer, nonce);
    }

    function _requireUnused(address authorizer, bytes32 nonce) private view {
        require(!_authorizationStates[authorizer][nonce], "EIP3009: authorization is used or canceled");
    }

    function _requireSignedBy(address signer, bytes32 structHash, bytes memory signature) private view {
        require(
            SignatureChecker.isValidSignatureNow(signer, _hashTypedData(structHash), signature),
            "EIP3009: invalid signature"
        );
    }
}
