// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IUniswapV3PoolMinimal} from "./IUniswapV3PoolMinimal.sol";
import {SafeTransfer} from "./SafeTransfer.sol";

/// @title Adds liquidity to a Uniswap V3 pool straight from the caller's wallet.
/// @notice The caller approves this contract for both pool tokens, then calls `seed`; the position is
///         owned by the caller and the owed tokens move from the caller to the pool.
contract PoolSeeder {
    /// @dev The pool being minted into and who pays for it; set only while `seed` runs.
    address private _pool;
    address private _payer;

    error SeedInProgress();
    error UnexpectedCallback(address caller);
    error PaymentFailed(address token, uint256 amount);

    function seed(address pool, int24 tickLower, int24 tickUpper, uint128 liquidity)
        external
        returns (uint256 amount0, uint256 amount1)
    {
        if (_pool != address(0)) revert SeedInProgress();
        _pool = pool;
        _payer = msg.sender;
        (amount0, amount1) = IUniswapV3PoolMinimal(pool).mint(msg.sender, tickLower, tickUpper, liquidity, "");
        delete _pool;
        delete _payer;
    }

    function uniswapV3MintCallback(uint256 amount0Owed, uint256 amount1Owed, bytes calldata) external {
        address pool = _pool;
        if (msg.sender != pool) revert UnexpectedCallback(msg.sender);
        address payer = _payer;
        if (amount0Owed != 0) _pay(IUniswapV3PoolMinimal(pool).token0(), payer, pool, amount0Owed);
        if (amount1Owed != 0) _pay(IUniswapV3PoolMinimal(pool).token1(), payer, pool, amount1Owed);
    }

    function _pay(address token, address payer, address pool, uint256 amount) private {
        if (!SafeTransfer.tryTransferFrom(token, payer, pool, amount)) revert PaymentFailed(token, amount);
    }
}
