// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title The part of a Uniswap V3 pool that PoolSeeder uses.
interface IUniswapV3PoolMinimal {
    function token0() external view returns (address);

    function token1() external view returns (address);

    /// @dev Calls `uniswapV3MintCallback(amount0Owed, amount1Owed, data)` on the caller before returning.
    function mint(address recipient, int24 tickLower, int24 tickUpper, uint128 amount, bytes calldata data)
        external
        returns (uint256 amount0, uint256 amount1);
}
