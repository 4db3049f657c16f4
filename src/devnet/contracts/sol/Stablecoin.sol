// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {EIP712} from "./EIP712.sol";
import {Erc20} from "./Erc20.sol";
import {Erc2612} from "./Erc2612.sol";
import {Erc3009} from "./Erc3009.sol";
import {Mintable} from "./Mintable.sol";

/// @title A 6-decimal USD stablecoin in the manner of USDC: EIP-2612 permits, EIP-3009 authorizations
///        and owner-appointed minters.
/// @notice The EIP-712 domain is {name, version, chainId, verifyingContract}, with `name` the token name.
contract Stablecoin is Mintable, Erc2612, Erc3009 {
    constructor(string memory name_, string memory symbol_, string memory version_, address owner_)
        Erc20(name_, symbol_, 6)
        EIP712(name_, version_)
        Mintable(owner_)
    {}

    /// @notice The version of the EIP-712 domain.
    function version() external view returns (string memory) {
        return _eip712Version();
    }
}
