// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Erc20} from "./Erc20.sol";
import {Mintable} from "./Mintable.sol";

/// @title An 18-decimal token standing for a stock, minted by owner-appointed minters.
contract StockToken is Mintable {
    constructor(string memory name_, string memory symbol_, address owner_)
        Erc20(name_, symbol_, 18)
        Mintable(owner_)
    {}
}
