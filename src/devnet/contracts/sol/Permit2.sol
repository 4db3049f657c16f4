// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {TypedData} from "./EIP712.sol";
import {ISignatureTransfer} from "./ISignatureTransfer.sol";
import {SafeTransfer} from "./SafeTransfer.sol";
import {SignatureChecker} from "./SignatureChecker.sol";

/// @title A Permit2 signature-transfer implementation for development chains.
/// @notice Its runtime code is meant to be copied to the canonical Permit2 address, so it has no
///         constructor, no immutables and no storage that needs initialising; the EIP-712 domain
///         `{name: "Permit2", chainId, verifyingContract}` is derived from the executing address on
///         every call.
/// @dev For every transfer: deadline, then amount, then nonce, then signature, then the token pull.
contract Permit2 is ISignatureTransfer {
    bytes32 private constant DOMAIN_TYPEHASH = keccak256("EIP712Domain(string name,uint256 chainId,address verifyingContract)");
    bytes32 private constant HASHED_NAME = keccak256("Permit2");

    bytes32 private constant TOKEN_PERMISSIONS_TYPEHASH = keccak256("TokenPermissions(address token,uint256 amount)");
    bytes32 private constant PERMIT_TRANSFER_FROM_TYPEHASH = keccak256(
        "PermitTransferFrom(TokenPermissions permitted,address spender,uint256 nonce,uint256 deadline)TokenPermissions(address token,uint256 amount)"
    );
    bytes32 private constant PERMIT_BATCH_TRANSFER_FROM_TYPEHASH = keccak256(
        "PermitBatchTransferFrom(TokenPermissions[] permitted,address spender,uint256 nonce,uint256 deadline)TokenPermissions(address token,uint256 amount)"
    );
    /// @dev Witness type strings complete these stubs: "<Witness type> witness)<referenced types, sorted>".
    string private constant PERMIT_WITNESS_STUB =
        "PermitWitnessTransferFrom(TokenPermissions permitted,address spender,uint256 nonce,uint256 deadline,";
    string private constant PERMIT_BATCH_WITNESS_STUB =
        "PermitBatchWitnessTransferFrom(TokenPermissions[] permitted,address spender,uint256 nonce,uint256 deadline,";

    /// @notice Used nonces: bit (nonce & 0xff) of word (nonce >> 8) is set once the nonce is spent.
    mapping(address owner => mapping(uint256 wordPos => uint256 bitmap)) public nonceBitmap;

    // solhint-disable-next-line func-name-mixedcase
    function DOMAIN_SEPARATOR() public view returns (bytes32) {
        return keccak256(abi.encode(DOMAIN_TYPEHASH, HASHED_NAME, block.chainid, address(this)));
    }

    function invalidateUnorderedNonces(uint256 wordPos, uint256 mask) external {
        nonceBitmap[msg.sender][wordPos] |= mask;
        emit UnorderedNonceInvalidation(msg.sender, wordPos, mask);
    }

    function permitTransferFrom(
        PermitTransferFrom calldata permit,
        SignatureTransferDetails calldata transferDetails,
        address owner,
        bytes calldata signature
    ) external {
        bytes32 structHash = keccak256(
            abi.encode(
                PERMIT_TRANSFER_FROM_TYPEHASH,
                _hashTokenPermissions(permit.permitted),
                msg.sender,
                permit.nonce,
                permit.deadline
            )
        );
        _transfer(permit, transferDetails, owner, structHash, signature);
    }

    function permitWitnessTransferFrom(
        PermitTransferFrom calldata permit,
        SignatureTransferDetails calldata transferDetails,
        address owner,
        bytes32 witness,
        string calldata witnessTypeString,
        bytes calldata signature
    ) external {
        bytes32 typeHash = keccak256(abi.encodePacked(PERMIT_WITNESS_STUB, witnessTypeString));
        bytes32 structHash = keccak256(
            abi.encode(
                typeHash, _hashTokenPermissions(permit.permitted), msg.sender, permit.nonce, permit.deadline, witness
            )
        );
        _transfer(permit, transferDetails, owner, structHash, signature);
    }

    function permitTransferFrom(
        PermitBatchTransferFrom calldata permit,
        SignatureTransferDetails[] calldata transferDetails,
        address owner,
        bytes calldata signature
    ) external {
        bytes32 structHash = keccak256(
            abi.encode(
                PERMIT_BATCH_TRANSFER_FROM_TYPEHASH,
                _hashTokenPermissionsList(permit.permitted),
                msg.sender,
                permit.nonce,
                permit.deadline
            )
        );
        _transferBatch(permit, transferDetails, owner, structHash, signature);
    }

    function permitWitnessTransferFrom(
        PermitBatchTransferFrom calldata permit,
        SignatureTransferDetails[] calldata transferDetails,
        address owner,
        bytes32 witness,
        string calldata witnessTypeString,
        bytes calldata signature
    ) external {
        bytes32 typeHash = keccak256(abi.encodePacked(PERMIT_BATCH_WITNESS_STUB, witnessTypeString));
        bytes32 structHash = keccak256(
            abi.encode(
                typeHash, _hashTokenPermissionsList(permit.permitted), msg.sender, permit.nonce, permit.deadline, witness
            )
        );
        _transferBatch(permit, transferDetails, owner, structHash, signature);
    }

    function _transfer(
        PermitTransferFrom calldata permit,
        SignatureTransferDetails calldata transferDetails,
        address owner,
        bytes32 structHash,
        bytes calldata signature
    ) private {
        if (block.timestamp > permit.deadline) revert SignatureExpired(permit.deadline);
        uint256 requestedAmount = transferDetails.requestedAmount;
        if (requestedAmount > permit.permitted.amount) revert InvalidAmount(permit.permitted.amount);
        _useUnorderedNonce(owner, permit.nonce);
        _verifySignature(owner, TypedData.digest(DOMAIN_SEPARATOR(), structHash), signature);
        _pull(permit.permitted.token, owner, transferDetails.to, requestedAmount);
    }

    function _transferBatch(
        PermitBatchTransferFrom calldata permit,
        SignatureTransferDetails[] calldata transferDetails,
        address owner,
        bytes32 structHash,
        bytes calldata signature
    ) private {
        if (block.timestamp > permit.deadline) revert SignatureExpired(permit.deadline);
        uint256 count = permit.permitted.length;
        if (count != transferDetails.length) revert LengthMismatch();
        _useUnorderedNonce(owner, permit.nonce);
        _verifySignature(owner, TypedData.digest(DOMAIN_SEPARATOR(), structHash), signature);
        for (uint256 i; i < count; ++i) {
            TokenPermissions calldata permitted = permit.permitted[i];
            uint256 requestedAmount = transferDetails[i].requestedAmount;
            if (requestedAmount > permitted.amount) revert InvalidAmount(permitted.amount);
            // A zero request skips that token: the spender chose not to use this part of the permit.
            if (requestedAmount != 0) _pull(permitted.token, owner, transferDetails[i].to, requestedAmount);
        }
    }

    function _useUnorderedNonce(address owner, uint256 nonce) private {
        uint256 wordPos = nonce >> 8;
        uint256 bit = 1 << (nonce & 0xff);
        uint256 word = nonceBitmap[owner][wordPos];
        if (word & bit != 0) revert InvalidNonce();
        nonceBitmap[owner][wordPos] = word | bit;
    }

    /// @dev An owner without code must have signed with ECDSA; an owner with code (a smart account, or an
    ///      EIP-7702 delegated account) may have signed with ECDSA or approve through EIP-1271.
    function _verifySignature(address owner, bytes32 digest, bytes calldata signature) private view {
        if (owner.code.length == 0) {
            (address signer, SignatureChecker.RecoverStatus status) = SignatureChecker.tryRecover(digest, signature);
            if (status == SignatureChecker.RecoverStatus.InvalidLength) revert InvalidSignatureLength();
            if (status != SignatureChecker.RecoverStatus.Ok) revert InvalidSignature();
            if (signer != owner) revert InvalidSigner();
        } else if (!SignatureChecker.isValidSignatureNow(owner, digest, signature)) {
            revert InvalidContractSignature();
        }
    }

    function _pull(address token, address from, address to, uint256 amount) private {
        if (!SafeTransfer.tryTransferFrom(token, from, to, amount)) revert TransferFromFailed();
    }

    function _hashTokenPermissions(TokenPermissions calldata permitted) private pure returns (bytes32) {
        return keccak256(abi.encode(TOKEN_PERMISSIONS_TYPEHASH, permitted.token, permitted.amount));
    }

    function _hashTokenPermissionsList(TokenPermissions[] calldata permitted) private pure returns (bytes32) {
        bytes32[] memory hashes = new bytes32[](permitted.length);
        for (uint256 i; i < permitted.length; ++i) {
            hashes[i] = _hashTokenPermissions(permitted[i]);
        }
        return keccak256(abi.encodePacked(hashes));
    }
}
