// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @notice The immutable terms of an x402 `batch-settlement` channel; its EIP-712 hash is the channel id.
/// @dev `payerAuthorizer` zero means vouchers are checked against `payer` (ECDSA or EIP-1271);
///      `receiverAuthorizer` signs claim batches and refunds and is never zero.
struct ChannelConfig {
    address payer;
    address payerAuthorizer;
    address receiver;
    address receiverAuthorizer;
    address token;
    uint40 withdrawDelay;
    bytes32 salt;
}

/// @notice A payer's cumulative promise: the receiver may claim up to `maxClaimableAmount` in total.
struct Voucher {
    ChannelConfig channel;
    uint128 maxClaimableAmount;
}

/// @notice One row of a claim: a signed voucher and the cumulative total the receiver side claims with it.
struct VoucherClaim {
    Voucher voucher;
    bytes signature;
    uint128 totalClaimed;
}

/// @title The EIP-712 type hashes and struct hashes of the `batch-settlement` scheme.
/// @dev The domain is `{name: "x402 Batch Settlement", version: "1", chainId, verifyingContract}`.
library BatchSettlementHashes {
    bytes32 internal constant DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
    bytes32 internal constant NAME_HASH = keccak256("x402 Batch Settlement");
    bytes32 internal constant VERSION_HASH = keccak256("1");

    bytes32 internal constant CHANNEL_CONFIG_TYPEHASH = keccak256(
        "ChannelConfig(address payer,address payerAuthorizer,address receiver,address receiverAuthorizer,address token,uint40 withdrawDelay,bytes32 salt)"
    );
    bytes32 internal constant VOUCHER_TYPEHASH = keccak256("Voucher(bytes32 channelId,uint128 maxClaimableAmount)");
    bytes32 internal constant REFUND_TYPEHASH = keccak256("Refund(bytes32 channelId,uint256 nonce,uint128 amount)");
    bytes32 internal constant CLAIM_BATCH_TYPEHASH = keccak256(
        "ClaimBatch(ClaimEntry[] claims)ClaimEntry(bytes32 channelId,uint128 maxClaimableAmount,uint128 totalClaimed)"
    );
    bytes32 internal constant CLAIM_ENTRY_TYPEHASH =
        keccak256("ClaimEntry(bytes32 channelId,uint128 maxClaimableAmount,uint128 totalClaimed)");

    /// @notice The domain separator of the settlement contract at `verifyingContract` on this chain.
    function domainSeparator(address verifyingContract) internal view returns (bytes32) {
        return keccak256(abi.encode(DOMAIN_TYPEHASH, NAME_HASH, VERSION_HASH, block.chainid, verifyingContract));
    }

    function configHash(ChannelConfig calldata config) internal pure returns (bytes32) {
        return keccak256(abi.encode(CHANNEL_CONFIG_TYPEHASH, config));
    }

    function voucherHash(bytes32 channelId, uint128 maxClaimableAmount) internal pure returns (bytes32) {
        return keccak256(abi.encode(VOUCHER_TYPEHASH, channelId, maxClaimableAmount));
    }

    function refundHash(bytes32 channelId, uint256 nonce, uint128 amount) internal pure returns (bytes32) {
        return keccak256(abi.encode(REFUND_TYPEHASH, channelId, nonce, amount));
    }

    /// @notice hashStruct(ClaimBatch): the array member is the hash of its entries' struct hashes, concatenated.
    function claimBatchHash(VoucherClaim[] calldata claims, bytes32[] memory channelIds)
        internal
        pure
        returns (bytes32)
    {
        uint256 count = claims.length;
        bytes32[] memory entryHashes = new bytes32[](count);
        for (uint256 i = 0; i < count; ++i) {
            entryHashes[i] = keccak256(
                abi.encode(
                    CLAIM_ENTRY_TYPEHASH, channelIds[i], claims[i].voucher.maxClaimableAmount, claims[i].totalClaimed
                )
            );
        }
        return keccak256(abi.encode(CLAIM_BATCH_TYPEHASH, keccak256(abi.encodePacked(entryHashes))));
    }

    /// @notice keccak256("\x19\x01" ‖ domainSeparator ‖ structHash).
    function digest(bytes32 separator, bytes32 structHash) internal pure returns (bytes32) {
        return keccak256(abi.encodePacked(hex"1901", separator, structHash));
    }
}
