// SPDX-License-Identifier: MIT
// A minimal ERC-1271 smart wallet for tests: a signature is valid when its owner EOA signed the
// digest itself (65-byte or EIP-2098 64-byte form). Real wallets wrap the digest in their own
// domain; this one does not, so an owner's EIP-712 signature for `from = wallet` is accepted as is.
pragma solidity ^0.8.24;

import "./Eip3009Token.sol";

contract OwnerWallet1271 {
    bytes4 internal constant MAGIC_VALUE = 0x1626ba7e;
    bytes4 internal constant INVALID_VALUE = 0xffffffff;

    address public immutable owner;

    constructor(address owner_) {
        owner = owner_;
    }

    function isValidSignature(bytes32 digest, bytes calldata signature) external view returns (bytes4) {
        address recovered = SignatureCheck.recover(digest, signature);
        return recovered != address(0) && recovered == owner ? MAGIC_VALUE : INVALID_VALUE;
    }
}
