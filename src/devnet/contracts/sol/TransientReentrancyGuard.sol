// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @title A reentrancy lock held in transient storage (EIP-1153, Cancun).
/// @dev Transient storage is cleared after every transaction, so the lock needs no initialisation and suits
///      runtime code copied to a canonical address.
abstract contract TransientReentrancyGuard {
    bool private transient _entered;

    error ReentrancyGuardReentrantCall();

    modifier nonReentrant() {
        if (_entered) revert ReentrancyGuardReentrantCall();
        _entered = true;
        _;
        _entered = false;
    }
}
