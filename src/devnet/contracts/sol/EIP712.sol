// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title EIP-712 typed-data digests.
library TypedData {
    /// @notice keccak256("\x19\x01" ‖ domainSeparator ‖ structHash).
    function digest(bytes32 domainSeparator, bytes32 structHash) internal pure returns (bytes32) {
        return keccak256(abi.encodePacked(hex"1901", domainSeparator, structHash));
    }
}

/// @title An EIP-712 domain `{name, version, chainId, verifyingContract}` with EIP-5267 discovery.
/// @dev The separator is cached at construction and rebuilt whenever the chain id or the contract's own
///      address differs from the cached ones (a fork, or runtime code placed at another address).
abstract contract EIP712 {
    bytes32 private constant DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");

    string private _domainName;
    string private _domainVersion;

    bytes32 private immutable _hashedName;
    bytes32 private immutable _hashedVersion;
    uint256 private immutable _cachedChainId;
    address private immutable _cachedThis;
    bytes32 private immutable _cachedDomainSeparator;

    constructor(string memory name_, string memory version_) {
        _domainName = name_;
        _domainVersion = version_;
        _hashedName = keccak256(bytes(name_));
        _hashedVersion = keccak256(bytes(version_));
        _cachedChainId = block.chainid;
        _cachedThis = address(this);
        _cachedDomainSeparator = _buildDomainSeparator(keccak256(bytes(name_)), keccak256(bytes(version_)));
    }

    /// @notice The EIP-712 domain separator for the current chain and this address.
    // solhint-disable-next-line func-name-mixedcase
    function DOMAIN_SEPARATOR() public view returns (bytes32) {
        if (block.chainid == _cachedChainId && address(this) == _cachedThis) return _cachedDomainSeparator;
        return _buildDomainSeparator(_hashedName, _hashedVersion);
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
        // 0x0f: name, version, chainId and verifyingContract are present; salt is not.
        return (hex"0f", _domainName, _domainVersion, block.chainid, address(this), bytes32(0), new uint256[](0));
    }

    function _eip712Version() internal view returns (string memory) {
        return _domainVersion;
    }

    function _hashTypedData(bytes32 structHash) internal view returns (bytes32) {
        return TypedData.digest(DOMAIN_SEPARATOR(), structHash);
    }

    function _buildDomainSeparator(bytes32 hashedName, bytes32 hashedVersion) private view returns (bytes32) {
        return keccak256(abi.encode(DOMAIN_TYPEHASH, hashedName, hashedVersion, block.chainid, address(this)));
    }
}
