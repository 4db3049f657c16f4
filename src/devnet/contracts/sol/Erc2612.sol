// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {EIP712} from "./EIP712.sol";
import {Erc20} from "./Erc20.sol";
import {SignatureChecker} from "./SignatureChecker.sol";

/// @title EIP-2612 approvals by signature.
/// @notice The owner may be an externally owned account or an EIP-1271 contract; the (v, r, s) form is
///         handed to the contract as the 65 bytes r ‖ s ‖ v.
abstract contract Erc2612 is Erc20, EIP712 {
    bytes32 public constant PERMIT_TYPEHASH =
        keccak256("Permit(address owner,address spender,uint256 value,uint256 nonce,uint256 deadline)");

    mapping(address owner => uint256) private _nonces;

    function nonces(address owner) public view returns (uint256) {
        return _nonces[owner];
    }

    function permit(
        address owner,
        address spender,
        uint256 value,
        uint256 deadline,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external {
        _permit(owner, spender, value, deadline, abi.encodePacked(r, s, v));
    }

    function permit(address owner, address spender, uint256 value, uint256 deadline, bytes calldata signature)
        external
    {
        _permit(owner, spender, value, deadline, signature);
    }

    function _permit(address owner, address spender, uint256 value, uint256 deadline, bytes memory signature)
        private
    {
        require(block.timestamp <= deadline, "EIP2612: permit is expired");
        bytes32 structHash = keccak256(abi.encode(PERMIT_TYPEHASH, owner, spender, value, _nonces[owner]++, deadline));
        require(
            SignatureChecker.isValidSignatureNow(owner, _hashTypedData(structHash), signature),
            "EIP2612: invalid signature"
        );
        _approve(owner, spender, value);
    }
}
