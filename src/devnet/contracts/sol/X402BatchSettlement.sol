// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {BatchSettlementHashes, ChannelConfig, VoucherClaim} from "./BatchSettlementTypes.sol";
import {IDepositCollector} from "./IDepositCollector.sol";
import {IERC20} from "./IERC20.sol";
import {SafeTransfer} from "./SafeTransfer.sol";
import {SignatureChecker} from "./SignatureChecker.sol";
import {TransientReentrancyGuard} from "./TransientReentrancyGuard.sol";

/// @title x402 `batch-settlement`: unidirectional payment channels claimed in batches.
/// @notice A payer deposits once into a channel (through a deposit collector) and pays each request with an
///         EIP-712 voucher carrying a cumulative ceiling. The receiver side claims many channels' vouchers in one
///         transaction (accounting only) and sweeps what it claimed to the receiver with `settle`, one transfer
///         per receiver and token. The payer leaves through a cooperative refund or, unilaterally, a timed
///         withdrawal that gives the receiver `withdrawDelay` seconds to claim what it was promised.
/// @dev A channel's `balance` is what was deposited minus what went back to the payer; `totalClaimed` only grows
///      and never exceeds `balance`, so `balance - totalClaimed` is the payer's unclaimed escrow. This contract is
///      the EIP-712 verifying contract of the scheme. Its runtime code is copied to the canonical address, so it
///      has no constructor, no immutables and no initialised storage; the domain separator is computed per call.
contract X402BatchSettlement is TransientReentrancyGuard {
    struct Channel {
        uint128 balance;
        uint128 totalClaimed;
    }

    struct PendingWithdrawal {
        uint128 amount;
        uint40 initiatedAt;
    }

    struct ReceiverTotals {
        uint128 totalClaimed;
        uint128 totalSettled;
    }

    /// @notice Bounds of `ChannelConfig.withdrawDelay`: 15 minutes to 30 days.
    uint40 public constant MIN_WITHDRAW_DELAY = 900;
    uint40 public constant MAX_WITHDRAW_DELAY = 2_592_000;

    // solhint-disable-next-line var-name-mixedcase
    bytes32 public constant CHANNEL_CONFIG_TYPEHASH = BatchSettlementHashes.CHANNEL_CONFIG_TYPEHASH;

    mapping(bytes32 channelId => Channel) public channels;
    mapping(bytes32 channelId => PendingWithdrawal) public pendingWithdrawals;
    mapping(bytes32 channelId => uint256) public refundNonce;
    mapping(address receiver => mapping(address token => ReceiverTotals)) public receivers;

    event ChannelCreated(bytes32 indexed channelId, ChannelConfig config);
    event Deposited(bytes32 indexed channelId, address indexed sender, uint128 amount, uint128 balance);
    event Claimed(bytes32 indexed channelId, address indexed sender, uint128 amount, uint128 totalClaimed);
    event Settled(address indexed receiver, address indexed token, address indexed sender, uint128 amount);
    event WithdrawInitiated(bytes32 indexed channelId, uint128 amount, uint40 finalizableAt);
    event WithdrawFinalized(bytes32 indexed channelId, uint128 amount);
    event Refunded(bytes32 indexed channelId, address indexed sender, uint128 amount, uint256 nonce);
    event ChannelClosed(bytes32 indexed channelId, ChannelConfig config);

    error ZeroAmount();
    error ZeroAddress();
    error WithdrawDelayOutOfRange(uint40 withdrawDelay);
    error DepositNotReceived(uint256 expected, uint256 received);
    error BalanceOverflow();
    error EmptyClaim();
    error NotReceiverSide(uint256 row);
    error MixedReceiverAuthorizers(uint256 row);
    error InvalidAuthorizerSignature();
    error InvalidVoucherSignature(bytes32 channelId);
    error ClaimAboveVoucher(bytes32 channelId, uint128 totalClaimed, uint128 maxClaimableAmount);
    error ClaimAboveBalance(bytes32 channelId, uint128 totalClaimed, uint128 balance);
    error NotPayerSide();
    error WithdrawAlreadyPending(bytes32 channelId);
    error WithdrawAboveUnclaimed(bytes32 channelId, uint128 amount, uint128 unclaimed);
    error NoPendingWithdraw(bytes32 channelId);
    error WithdrawDelayNotElapsed(bytes32 channelId, uint256 finalizableAt);
    error InvalidRefundNonce(bytes32 channelId, uint256 expected, uint256 given);
    error TransferFailed();

    // ---------------------------------------------------------------- deposits

    /// @notice Adds `amount` of the channel's token to the channel, pulled from its payer by `collector`.
    /// @dev Anyone may submit a deposit (the facilitator sponsors it); the payer's authorization inside
    ///      `collectorData` binds the channel id, so it cannot be spent on another channel. What counts is what
    ///      arrived: the contract's token balance must grow by exactly `amount`.
    function deposit(ChannelConfig calldata config, uint128 amount, address collector, bytes calldata collectorData)
        external
        nonReentrant
    {
        if (amount == 0) revert ZeroAmount();
        _requireValidConfig(config);
        bytes32 channelId = _channelId(config);
        IERC20 token = IERC20(config.token);
        uint256 before = token.balanceOf(address(this));
        IDepositCollector(collector).collect(config.payer, config.token, amount, channelId, collectorData);
        uint256 received = token.balanceOf(address(this)) - before;
        if (received != amount) revert DepositNotReceived(amount, received);

        Channel storage channel = channels[channelId];
        Channel memory current = channel;
        if (current.balance == 0 && current.totalClaimed == 0) emit ChannelCreated(channelId, config);
        uint256 newBalance = uint256(current.balance) + amount;
        if (newBalance > type(uint128).max) revert BalanceOverflow();
        channel.balance = uint128(newBalance);
        emit Deposited(channelId, msg.sender, amount, uint128(newBalance));
    }

    // ---------------------------------------------------------------- claims

    /// @notice Claims the rows' vouchers; the caller must be the receiver or receiver authorizer of every row.
    function claim(VoucherClaim[] calldata voucherClaims) external nonReentrant {
        uint256 count = voucherClaims.length;
        if (count == 0) revert EmptyClaim();
        for (uint256 i = 0; i < count; ++i) {
            ChannelConfig calldata config = voucherClaims[i].voucher.channel;
            if (msg.sender != config.receiver && msg.sender != config.receiverAuthorizer) revert NotReceiverSide(i);
        }
        bytes32 separator = BatchSettlementHashes.domainSeparator(address(this));
        _claimRows(voucherClaims, _channelIds(voucherClaims, separator), separator);
    }

    /// @notice Claims the rows' vouchers on the strength of one EIP-712 `ClaimBatch` signature by their common
    ///         receiver authorizer; anyone may relay it.
    function claimWithSignature(VoucherClaim[] calldata voucherClaims, bytes calldata authorizerSignature)
        external
        nonReentrant
    {
        uint256 count = voucherClaims.length;
        if (count == 0) revert EmptyClaim();
        address authorizer = voucherClaims[0].voucher.channel.receiverAuthorizer;
        for (uint256 i = 1; i < count; ++i) {
            if (voucherClaims[i].voucher.channel.receiverAuthorizer != authorizer) revert MixedReceiverAuthorizers(i);
        }
        bytes32 separator = BatchSettlementHashes.domainSeparator(address(this));
        bytes32[] memory channelIds = _channelIds(voucherClaims, separator);
        bytes32 batchDigest =
            BatchSettlementHashes.digest(separator, BatchSettlementHashes.claimBatchHash(voucherClaims, channelIds));
        if (!SignatureChecker.isValidSignatureNow(authorizer, batchDigest, authorizerSignature)) {
            revert InvalidAuthorizerSignature();
        }
        _claimRows(voucherClaims, channelIds, separator);
    }

    /// @notice Sends `receiver` everything claimed for it in `token` and not yet sent. Permissionless; a no-op
    ///         when nothing is due.
    function settle(address receiver, address token) external nonReentrant {
        ReceiverTotals storage totals = receivers[receiver][token];
        ReceiverTotals memory current = totals;
        uint128 amount = current.totalClaimed - current.totalSettled;
        if (amount == 0) return;
        totals.totalSettled = current.totalClaimed;
        if (!SafeTransfer.tryTransfer(token, receiver, amount)) revert TransferFailed();
        emit Settled(receiver, token, msg.sender, amount);
    }

    // ---------------------------------------------------------------- the payer's timed withdrawal

    /// @notice Starts the payer's escape hatch: after `withdrawDelay` seconds up to `amount` of the unclaimed
    ///         escrow can be taken back, whatever the receiver side does.
    function initiateWithdraw(ChannelConfig calldata config, uint128 amount) external nonReentrant {
        _requirePayerSide(config);
        if (amount == 0) revert ZeroAmount();
        bytes32 channelId = _channelId(config);
        if (pendingWithdrawals[channelId].initiatedAt != 0) revert WithdrawAlreadyPending(channelId);
        Channel memory channel = channels[channelId];
        uint128 unclaimed = channel.balance - channel.totalClaimed;
        if (amount > unclaimed) revert WithdrawAboveUnclaimed(channelId, amount, unclaimed);
        uint40 now40 = uint40(block.timestamp);
        pendingWithdrawals[channelId] = PendingWithdrawal({amount: amount, initiatedAt: now40});
        emit WithdrawInitiated(channelId, amount, now40 + config.withdrawDelay);
    }

    /// @notice Completes a timed withdrawal once its delay has elapsed, capped at the escrow still unclaimed.
    function finalizeWithdraw(ChannelConfig calldata config) external nonReentrant {
        _requirePayerSide(config);
        bytes32 channelId = _channelId(config);
        PendingWithdrawal memory pending = pendingWithdrawals[channelId];
        if (pending.initiatedAt == 0) revert NoPendingWithdraw(channelId);
        uint256 finalizableAt = uint256(pending.initiatedAt) + config.withdrawDelay;
        if (block.timestamp < finalizableAt) revert WithdrawDelayNotElapsed(channelId, finalizableAt);
        delete pendingWithdrawals[channelId];
        Channel storage channel = channels[channelId];
        Channel memory current = channel;
        uint128 unclaimed = current.balance - current.totalClaimed;
        uint128 amount = pending.amount < unclaimed ? pending.amount : unclaimed;
        if (amount > 0) {
            channel.balance = current.balance - amount;
            if (!SafeTransfer.tryTransfer(config.token, config.payer, amount)) revert TransferFailed();
        }
        emit WithdrawFinalized(channelId, amount);
        if (amount > 0 && amount == unclaimed) emit ChannelClosed(channelId, config);
    }

    // ---------------------------------------------------------------- cooperative refunds

    /// @notice Returns up to `amount` of the unclaimed escrow to the payer; called by the receiver side itself.
    function refund(ChannelConfig calldata config, uint128 amount) external nonReentrant {
        if (msg.sender != config.receiver && msg.sender != config.receiverAuthorizer) revert NotReceiverSide(0);
        bytes32 channelId = _channelId(config);
        _refund(config, channelId, amount);
    }

    /// @notice Returns up to `amount` of the unclaimed escrow to the payer on the receiver authorizer's EIP-712
    ///         `Refund` signature for the channel's current refund nonce; anyone may relay it.
    function refundWithSignature(
        ChannelConfig calldata config,
        uint128 amount,
        uint256 nonce,
        bytes calldata receiverAuthorizerSignature
    ) external nonReentrant {
        bytes32 channelId = _channelId(config);
        uint256 expected = refundNonce[channelId];
        if (nonce != expected) revert InvalidRefundNonce(channelId, expected, nonce);
        bytes32 refundDigest = BatchSettlementHashes.digest(
            BatchSettlementHashes.domainSeparator(address(this)), BatchSettlementHashes.refundHash(channelId, nonce, amount)
        );
        if (!SignatureChecker.isValidSignatureNow(config.receiverAuthorizer, refundDigest, receiverAuthorizerSignature)) {
            revert InvalidAuthorizerSignature();
        }
        _refund(config, channelId, amount);
    }

    // ---------------------------------------------------------------- batching

    /// @notice Runs several calls to this contract in one transaction (e.g. a claim, then a refund); any revert
    ///         reverts them all.
    function multicall(bytes[] calldata data) external returns (bytes[] memory results) {
        uint256 count = data.length;
        results = new bytes[](count);
        for (uint256 i = 0; i < count; ++i) {
            (bool success, bytes memory returned) = address(this).delegatecall(data[i]);
            if (!success) {
                assembly ("memory-safe") {
                    revert(add(returned, 0x20), mload(returned))
                }
            }
            results[i] = returned;
        }
    }

    // ---------------------------------------------------------------- views

    function getChannelId(ChannelConfig calldata config) external view returns (bytes32) {
        return _channelId(config);
    }

    function getVoucherDigest(bytes32 channelId, uint128 maxClaimableAmount) external view returns (bytes32) {
        return BatchSettlementHashes.digest(
            BatchSettlementHashes.domainSeparator(address(this)),
            BatchSettlementHashes.voucherHash(channelId, maxClaimableAmount)
        );
    }

    function getRefundDigest(bytes32 channelId, uint256 nonce, uint128 amount) external view returns (bytes32) {
        return BatchSettlementHashes.digest(
            BatchSettlementHashes.domainSeparator(address(this)), BatchSettlementHashes.refundHash(channelId, nonce, amount)
        );
    }

    function getClaimBatchDigest(VoucherClaim[] calldata voucherClaims) external view returns (bytes32) {
        bytes32 separator = BatchSettlementHashes.domainSeparator(address(this));
        return BatchSettlementHashes.digest(
            separator, BatchSettlementHashes.claimBatchHash(voucherClaims, _channelIds(voucherClaims, separator))
        );
    }

    // solhint-disable-next-line func-name-mixedcase
    function DOMAIN_SEPARATOR() external view returns (bytes32) {
        return BatchSettlementHashes.domainSeparator(address(this));
    }

    /// @notice EIP-5267: the fields of this contract's EIP-712 domain.
    function eip712Domain()
        external
        view
        returns (
            bytes1 fields,
            string memory name,
            string memory version,
            uint256 chainId,
            address verifyingContract,
            bytes32 salt,
            uint256[] memory extensions
        )
    {
        return (hex"0f", "x402 Batch Settlement", "1", block.chainid, address(this), bytes32(0), new uint256[](0));
    }

    // ---------------------------------------------------------------- internals

    function _channelId(ChannelConfig calldata config) private view returns (bytes32) {
        return BatchSettlementHashes.digest(
            BatchSettlementHashes.domainSeparator(address(this)), BatchSettlementHashes.configHash(config)
        );
    }

    function _channelIds(VoucherClaim[] calldata voucherClaims, bytes32 separator)
        private
        pure
        returns (bytes32[] memory ids)
    {
        uint256 count = voucherClaims.length;
        ids = new bytes32[](count);
        for (uint256 i = 0; i < count; ++i) {
            ids[i] = BatchSettlementHashes.digest(separator, BatchSettlementHashes.configHash(voucherClaims[i].voucher.channel));
        }
    }

    function _requireValidConfig(ChannelConfig calldata config) private pure {
        if (
            config.payer == address(0) || config.receiver == address(0) || config.receiverAuthorizer == address(0)
                || config.token == address(0)
        ) revert ZeroAddress();
        if (config.withdrawDelay < MIN_WITHDRAW_DELAY || config.withdrawDelay > MAX_WITHDRAW_DELAY) {
            revert WithdrawDelayOutOfRange(config.withdrawDelay);
        }
    }

    function _requirePayerSide(ChannelConfig calldata config) private view {
        if (msg.sender != config.payer && (config.payerAuthorizer == address(0) || msg.sender != config.payerAuthorizer)) {
            revert NotPayerSide();
        }
    }

    /// @dev A row whose `totalClaimed` does not exceed the channel's is superseded or already claimed: it changes
    ///      nothing and is skipped, so a claim can be retried. Consecutive rows of one receiver and token add up
    ///      into one write of the receiver's totals.
    function _claimRows(VoucherClaim[] calldata voucherClaims, bytes32[] memory channelIds, bytes32 separator) private {
        address pendingReceiver;
        address pendingToken;
        uint128 pendingAmount;
        uint256 count = voucherClaims.length;
        for (uint256 i = 0; i < count; ++i) {
            VoucherClaim calldata row = voucherClaims[i];
            bytes32 channelId = channelIds[i];
            uint128 newTotal = row.totalClaimed;
            uint128 ceiling = row.voucher.maxClaimableAmount;
            if (newTotal > ceiling) revert ClaimAboveVoucher(channelId, newTotal, ceiling);
            Channel storage channel = channels[channelId];
            Channel memory current = channel;
            if (newTotal <= current.totalClaimed) continue;
            if (newTotal > current.balance) revert ClaimAboveBalance(channelId, newTotal, current.balance);
            ChannelConfig calldata config = row.voucher.channel;
            bytes32 voucherDigest =
                BatchSettlementHashes.digest(separator, BatchSettlementHashes.voucherHash(channelId, ceiling));
            if (!_validVoucherSignature(config, voucherDigest, row.signature)) revert InvalidVoucherSignature(channelId);

            channel.totalClaimed = newTotal;
            uint128 delta = newTotal - current.totalClaimed;
            emit Claimed(channelId, msg.sender, delta, newTotal);

            if (config.receiver != pendingReceiver || config.token != pendingToken) {
                _creditReceiver(pendingReceiver, pendingToken, pendingAmount);
                pendingReceiver = config.receiver;
                pendingToken = config.token;
                pendingAmount = 0;
            }
            pendingAmount += delta;
        }
        _creditReceiver(pendingReceiver, pendingToken, pendingAmount);
    }

    function _creditReceiver(address receiver, address token, uint128 amount) private {
        if (amount == 0) return;
        receivers[receiver][token].totalClaimed += amount;
    }

    /// @dev A committed payer authorizer is an EOA: ECDSA only, no call. Otherwise the payer itself signs,
    ///      as an EOA or through EIP-1271.
    function _validVoucherSignature(ChannelConfig calldata config, bytes32 voucherDigest, bytes calldata signature)
        private
        view
        returns (bool)
    {
        if (config.payerAuthorizer != address(0)) {
            (address signer, SignatureChecker.RecoverStatus status) = SignatureChecker.tryRecover(voucherDigest, signature);
            return status == SignatureChecker.RecoverStatus.Ok && signer == config.payerAuthorizer;
        }
        return SignatureChecker.isValidSignatureNow(config.payer, voucherDigest, signature);
    }

    /// @dev The nonce advances first, whether or not anything is left to return. A pending timed withdrawal
    ///      shrinks by what was refunded, and goes when the refund covers it.
    function _refund(ChannelConfig calldata config, bytes32 channelId, uint128 amount) private {
        if (amount == 0) revert ZeroAmount();
        uint256 nonce = refundNonce[channelId];
        refundNonce[channelId] = nonce + 1;
        Channel storage channel = channels[channelId];
        Channel memory current = channel;
        uint128 unclaimed = current.balance - current.totalClaimed;
        uint128 refunded = amount < unclaimed ? amount : unclaimed;
        if (refunded == 0) return;
        channel.balance = current.balance - refunded;
        PendingWithdrawal storage pending = pendingWithdrawals[channelId];
        uint128 pendingAmount = pending.amount;
        if (pendingAmount != 0) {
            if (refunded >= pendingAmount) delete pendingWithdrawals[channelId];
            else pending.amount = pendingAmount - refunded;
        }
        if (!SafeTransfer.tryTransfer(config.token, config.payer, refunded)) revert TransferFailed();
        emit Refunded(channelId, msg.sender, refunded, nonce);
        if (refunded == unclaimed) emit ChannelClosed(channelId, config);
    }
}
