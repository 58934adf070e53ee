// SPDX-License-Identifier: MIT
// Test stand-ins for the x402 Permit2 proxies (x402ExactPermit2Proxy, x402UptoPermit2Proxy),
// written to the interface @x402/evm 2.27 calls: settle(permit, [amount,] owner, witness,
// signature), PERMIT2(), the witness type strings, and the custom errors. The local chain places
// their runtime code at the canonical CREATE2 addresses, so Permit2's address is a constant here
// (the real ones set it once through initialize()).
pragma solidity ^0.8.24;

interface ISignatureTransferLocal {
    struct TokenPermissions {
        address token;
        uint256 amount;
    }

    struct PermitTransferFrom {
        TokenPermissions permitted;
        uint256 nonce;
        uint256 deadline;
    }

    struct SignatureTransferDetails {
        address to;
        uint256 requestedAmount;
    }

    function permitWitnessTransferFrom(
        PermitTransferFrom calldata permit,
        SignatureTransferDetails calldata transferDetails,
        address owner,
        bytes32 witness,
        string calldata witnessTypeString,
        bytes calldata signature
    ) external;
}

abstract contract ProxyBase {
    ISignatureTransferLocal public constant PERMIT2 = ISignatureTransferLocal(0x000000000022D473030F116dDEE9F6B43aC78BA3);

    event Settled();

    error InvalidDestination();
    error InvalidOwner();
    error InvalidAmount();
    error PaymentTooEarly();

    uint256 private locked;

    modifier nonReentrant() {
        require(locked == 0, "ReentrancyGuardReentrantCall");
        locked = 1;
        _;
        locked = 0;
    }

    function checkCommon(address owner, address to, uint256 validAfter) internal view {
        if (owner == address(0)) revert InvalidOwner();
        if (to == address(0)) revert InvalidDestination();
        if (block.timestamp < validAfter) revert PaymentTooEarly();
    }
}

/// Transfers exactly the permitted amount to witness.to.
contract X402ExactPermit2ProxyLocal is ProxyBase {
    struct Witness {
        address to;
        uint256 validAfter;
    }

    string public constant WITNESS_TYPE_STRING =
        "Witness witness)TokenPermissions(address token,uint256 amount)Witness(address to,uint256 validAfter)";
    bytes32 public constant WITNESS_TYPEHASH = keccak256("Witness(address to,uint256 validAfter)");

    function settle(
        ISignatureTransferLocal.PermitTransferFrom calldata permit,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) external nonReentrant {
        uint256 amount = permit.permitted.amount;
        if (amount == 0) revert InvalidAmount();
        checkCommon(owner, witness.to, witness.validAfter);
        bytes32 witnessHash = keccak256(abi.encode(WITNESS_TYPEHASH, witness.to, witness.validAfter));
        PERMIT2.permitWitnessTransferFrom(
            permit, ISignatureTransferLocal.SignatureTransferDetails({to: witness.to, requestedAmount: amount}),
            owner, witnessHash, WITNESS_TYPE_STRING, signature
        );
        emit Settled();
    }
}

/// Transfers an amount up to the permitted one; only the facilitator named in the witness may settle.
contract X402UptoPermit2ProxyLocal is ProxyBase {
    struct Witness {
        address to;
        address facilitator;
        uint256 validAfter;
    }

    error AmountExceedsPermitted();
    error UnauthorizedFacilitator();

    string public constant WITNESS_TYPE_STRING =
        "Witness witness)TokenPermissions(address token,uint256 amount)Witness(address to,address facilitator,uint256 validAfter)";
    bytes32 public constant WITNESS_TYPEHASH = keccak256("Witness(address to,address facilitator,uint256 validAfter)");

    function settle(
        ISignatureTransferLocal.PermitTransferFrom calldata permit,
        uint256 amount,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) external nonReentrant {
        if (amount == 0) revert InvalidAmount();
        if (amount > permit.permitted.amount) revert AmountExceedsPermitted();
        if (msg.sender != witness.facilitator) revert UnauthorizedFacilitator();
        checkCommon(owner, witness.to, witness.validAfter);
        bytes32 witnessHash = keccak256(abi.encode(WITNESS_TYPEHASH, witness.to, witness.facilitator, witness.validAfter));
        PERMIT2.permitWitnessTransferFrom(
            permit, ISignatureTransferLocal.SignatureTransferDetails({to: witness.to, requestedAmount: amount}),
            owner, witnessHash, WITNESS_TYPE_STRING, signature
        );
        emit Settled();
    }
}
