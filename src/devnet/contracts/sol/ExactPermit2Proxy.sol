// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20Permit} from "./IERC20Permit.sol";
import {ISignatureTransfer} from "./ISignatureTransfer.sol";

/// @title The x402 "exact" Permit2 settlement proxy.
/// @notice The payer signs a Permit2 `PermitWitnessTransferFrom` whose spender is this contract and whose
///         witness `Witness(address to,uint256 validAfter)` fixes the payee and the earliest settlement
///         time. Anyone (the facilitator) may then submit it; the full permitted amount goes to the payee.
/// @dev Its runtime code is copied to the canonical x402 proxy address, so it has no constructor, no
///      immutables and no initialised storage. The reentrancy lock lives in transient storage.
contract ExactPermit2Proxy {
    struct Witness {
        address to;
        uint256 validAfter;
    }

    struct EIP2612Permit {
        uint256 value;
        uint256 deadline;
        bytes32 r;
        bytes32 s;
        uint8 v;
    }

    ISignatureTransfer public constant PERMIT2 = ISignatureTransfer(0x000000000022D473030F116dDEE9F6B43aC78BA3);

    bytes32 public constant WITNESS_TYPEHASH = keccak256("Witness(address to,uint256 validAfter)");

    string public constant WITNESS_TYPE_STRING =
        "Witness witness)TokenPermissions(address token,uint256 amount)Witness(address to,uint256 validAfter)";

    /// @dev keccak256("gate402.ExactPermit2Proxy.reentrancy"), a transient-storage slot.
    uint256 private constant REENTRANCY_LOCK_SLOT = 0x914dd16ef79c2a633891e53dd061fcab0d60c827a8db1a0a828d1f1ad8f7c13b;

    event Settled();
    event SettledWithPermit();

    error InvalidAmount();
    error InvalidDestination();
    error InvalidOwner();
    error InvalidPermit2Address();
    error PaymentTooEarly();
    error Permit2612AmountMismatch();
    error ReentrancyGuardReentrantCall();

    modifier nonReentrant() {
        bool locked;
        assembly ("memory-safe") {
            locked := tload(REENTRANCY_LOCK_SLOT)
        }
        if (locked) revert ReentrancyGuardReentrantCall();
        assembly ("memory-safe") {
            tstore(REENTRANCY_LOCK_SLOT, 1)
        }
        _;
        assembly ("memory-safe") {
            tstore(REENTRANCY_LOCK_SLOT, 0)
        }
    }

    /// @notice Settles a payment the owner has already enabled by approving Permit2 for the token.
    function settle(
        ISignatureTransfer.PermitTransferFrom calldata permit,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) external nonReentrant {
        _settle(permit, owner, witness, signature);
        emit Settled();
    }

    /// @notice Settles a payment after first trying an EIP-2612 permit that approves Permit2 for the token.
    /// @dev A failing permit is ignored: it may already have been submitted by someone else, in which case
    ///      the allowance is in place; if it is not, Permit2's transfer fails instead.
    function settleWithPermit(
        EIP2612Permit calldata permit2612,
        ISignatureTransfer.PermitTransferFrom calldata permit,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) external nonReentrant {
        if (permit2612.value < permit.permitted.amount) revert Permit2612AmountMismatch();
        _tryPermit(permit.permitted.token, owner, permit2612);
        _settle(permit, owner, witness, signature);
        emit SettledWithPermit();
    }

    function _settle(
        ISignatureTransfer.PermitTransferFrom calldata permit,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) private {
        if (owner == address(0)) revert InvalidOwner();
        if (witness.to == address(0)) revert InvalidDestination();
        if (permit.permitted.amount == 0) revert InvalidAmount();
        if (block.timestamp < witness.validAfter) revert PaymentTooEarly();
        if (address(PERMIT2).code.length == 0) revert InvalidPermit2Address();
        PERMIT2.permitWitnessTransferFrom(
            permit,
            ISignatureTransfer.SignatureTransferDetails({to: witness.to, requestedAmount: permit.permitted.amount}),
            owner,
            keccak256(abi.encode(WITNESS_TYPEHASH, witness.to, witness.validAfter)),
            WITNESS_TYPE_STRING,
            signature
        );
    }

    function _tryPermit(address token, address owner, EIP2612Permit calldata permit2612) private {
        (bool accepted,) = token.call(
            abi.encodeCall(
                IERC20Permit.permit,
                (owner, address(PERMIT2), permit2612.value, permit2612.deadline, permit2612.v, permit2612.r, permit2612.s)
            )
        );
        if (!accepted) {
            // Ignored on purpose, see settleWithPermit.
        }
    }
}
