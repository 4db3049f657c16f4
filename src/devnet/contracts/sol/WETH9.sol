// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Erc20} from "./Erc20.sol";

/// @title Wrapped native token: one WETH per wei deposited, redeemable at any time.
contract WETH9 is Erc20 {
    event Deposit(address indexed dst, uint256 wad);
    event Withdrawal(address indexed src, uint256 wad);

    constructor() Erc20("Wrapped Ether", "WETH", 18) {}

    receive() external payable {
        deposit();
    }

    function deposit() public payable {
        _mint(msg.sender, msg.value);
        emit Deposit(msg.sender, msg.value);
    }

    function withdraw(uint256 wad) external {
        _burn(msg.sender, wad);
        emit Withdrawal(msg.sender, wad);
        (bool sent,) = msg.sender.call{value: wad}("");
        require(sent, "WETH: native transfer failed");
    }
}
