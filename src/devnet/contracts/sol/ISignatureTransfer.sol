// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title The signature-transfer half of Permit2: one-time signed transfers guarded by unordered nonces.
interface ISignatureTransfer {
    struct TokenPermissions {
        address token;
        uint256 amount;
    }

    struct PermitTransferFrom {
        TokenPermissions permitted;
        uint256 nonce;
        uint256 deadline;
    }

    struct PermitBatchTransferFrom {
        TokenPermissions[] permitted;
        uint256 nonce;
        uint256 deadline;
    }

    struct SignatureTransferDetails {
        address to;
        uint256 requestedAmount;
    }

    /// @notice The permit's deadline has passed.
    error SignatureExpired(uint256 signatureDeadline);
    /// @notice More was requested than the permit allows.
    error InvalidAmount(uint256 maxAmount);
    /// @notice A batch permit and its transfer details differ in length.
    error LengthMismatch();
    /// @notice The nonce was already used or invalidated.
    error InvalidNonce();
    /// @notice An ECDSA signature that is neither 65 nor 64 bytes long.
    error InvalidSignatureLength();
    /// @notice An ECDSA signature from which no signer can be recovered.
    error InvalidSignature();
    /// @notice An ECDSA signature made by someone other than the owner.
    error InvalidSigner();
    /// @notice A contract owner did not approve the signature through EIP-1271.
    error InvalidContractSignature();
    /// @notice The token's `transferFrom` reverted or returned false.
    error TransferFromFailed();

    event UnorderedNonceInvalidation(address indexed owner, uint256 word, uint256 mask);

    // solhint-disable-next-line func-name-mixedcase
    function DOMAIN_SEPARATOR() external view returns (bytes32);

    function nonceBitmap(address owner, uint256 wordPos) external view returns (uint256);

    function invalidateUnorderedNonces(uint256 wordPos, uint256 mask) external;

    function permitTransferFrom(
        PermitTransferFrom calldata permit,
        SignatureTransferDetails calldata transferDetails,
        address owner,
        bytes calldata signature
    ) external;

    function permitWitnessTransferFrom(
        PermitTransferFrom calldata permit,
        SignatureTransferDetails calldata transferDetails,
        address owner,
        bytes32 witness,
        string calldata witnessTypeString,
        bytes calldata signature
    ) external;

    function permitTransferFrom(
        PermitBatchTransferFrom calldata permit,
        SignatureTransferDetails[] calldata transferDetails,
        address owner,
        bytes calldata signature
    ) external;

    function permitWitnessTransferFrom(
        PermitBatchTransferFrom calldata permit,
        SignatureTransferDetails[] calldata transferDetails,
        address owner,
        bytes32 witness,
        string calldata witnessTypeString,
        bytes calldata signature
    ) external;
}
