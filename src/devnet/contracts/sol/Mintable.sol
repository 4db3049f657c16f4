// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Erc20} from "./Erc20.sol";

/// @title An owner who appoints minters.
/// @notice The initial owner is a minter from construction. Ownership and minter rights are independent
///         afterwards: transferring ownership does not grant or revoke minting.
abstract contract Mintable is Erc20 {
    address private _owner;
    mapping(address account => bool) private _minters;

    event OwnershipTransferred(address indexed previousOwner, address indexed newOwner);
    event MinterConfigured(address indexed minter, bool enabled);

    error CallerIsNotOwner(address caller);
    error CallerIsNotMinter(address caller);
    error OwnerIsZeroAddress();

    modifier onlyOwner() {
        if (msg.sender != _owner) revert CallerIsNotOwner(msg.sender);
        _;
    }

    constructor(address initialOwner) {
        if (initialOwner == address(0)) revert OwnerIsZeroAddress();
        _owner = initialOwner;
        emit OwnershipTransferred(address(0), initialOwner);
        _minters[initialOwner] = true;
        emit MinterConfigured(initialOwner, true);
    }

    function owner() public view returns (address) {
        return _owner;
    }

    function isMinter(address account) public view returns (bool) {
        return _minters[account];
    }

    function transferOwnership(address newOwner) external onlyOwner {
        if (newOwner == address(0)) revert OwnerIsZeroAddress();
        emit OwnershipTransferred(_owner, newOwner);
        _owner = newOwner;
    }

    function setMinter(address minter, bool enabled) external onlyOwner {
        _minters[minter] = enabled;
        emit MinterConfigured(minter, enabled);
    }

    function mint(address to, uint256 amount) external {
        if (!_minters[msg.sender]) revert CallerIsNotMinter(msg.sender);
        _mint(to, amount);
    }
}
