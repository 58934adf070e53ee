/**
 * LiteSVM's transaction errors in Solana's JSON-RPC form (`"BlockhashNotFound"`,
 * `{"InstructionError": [2, {"Custom": 1}]}`), as a node reports them. The names are those of
 * the Solana SDK's `TransactionError` / `InstructionError`, in their enum order (LiteSVM exposes
 * the numeric discriminants).
 */
const transactionErrors = [
  'AccountInUse', 'AccountLoadedTwice', 'AccountNotFound', 'ProgramAccountNotFound', 'InsufficientFundsForFee',
  'InvalidAccountForFee', 'AlreadyProcessed', 'BlockhashNotFound', 'CallChainTooDeep', 'MissingSignatureForFee',
  'InvalidAccountIndex', 'SignatureFailure', 'InvalidProgramForExecution', 'SanitizeFailure', 'ClusterMaintenance',
  'AccountBorrowOutstanding', 'WouldExceedMaxBlockCostLimit', 'UnsupportedVersion', 'InvalidWritableAccount',
  'WouldExceedMaxAccountCostLimit', 'WouldExceedAccountDataBlockLimit', 'TooManyAccountLocks',
  'AddressLookupTableNotFound', 'InvalidAddressLookupTableOwner', 'InvalidAddressLookupTableData',
  'InvalidAddressLookupTableIndex', 'InvalidRentPayingAccount', 'WouldExceedMaxVoteCostLimit',
  'WouldExceedAccountDataTotalLimit', 'MaxLoadedAccountsDataSizeExceeded', 'ResanitizationNeeded',
  'InvalidLoadedAccountsDataSizeLimit', 'UnbalancedTransaction', 'ProgramCacheHitMaxLimit', 'CommitCancelled',
]

const instructionErrors = [
  'GenericError', 'InvalidArgument', 'InvalidInstructionData', 'InvalidAccountData', 'AccountDataTooSmall',
  'InsufficientFunds', 'IncorrectProgramId', 'MissingRequiredSignature', 'AccountAlreadyInitialized',
  'UninitializedAccount', 'UnbalancedInstruction', 'ModifiedProgramId', 'ExternalAccountLamportSpend',
  'ExternalAccountDataModified', 'ReadonlyLamportChange', 'ReadonlyDataModified', 'DuplicateAccountIndex',
  'ExecutableModified', 'RentEpochModified', 'NotEnoughAccountKeys', 'AccountDataSizeChanged',
  'AccountNotExecutable', 'AccountBorrowFailed', 'AccountBorrowOutstanding', 'DuplicateAccountOutOfSync',
  'InvalidError', 'ExecutableDataModified', 'ExecutableLamportChange', 'ExecutableAccountNotRentExempt',
  'UnsupportedProgramId', 'CallDepth', 'MissingAccount', 'ReentrancyNotAllowed', 'MaxSeedLengthExceeded',
  'InvalidSeeds', 'InvalidRealloc', 'ComputationalBudgetExceeded', 'PrivilegeEscalation',
  'ProgramEnvironmentSetupFailure', 'ProgramFailedToComplete', 'ProgramFailedToCompile', 'Immutable',
  'IncorrectAuthority', 'AccountNotRentExempt', 'InvalidAccountOwner', 'ArithmeticOverflow', 'UnsupportedSysvar',
  'IllegalOwner', 'MaxAccountsDataAllocationsExceeded', 'MaxAccountsExceeded', 'MaxInstructionTraceLengthExceeded',
  'BuiltinProgramsMustConsumeComputeUnits', 'BorshIoError',
]

function instructionErrorJson(err: unknown): unknown {
  if (typeof err === 'number') return instructionErrors[err] ?? `InstructionError${err}`
  const e = err as { code?: number }
  if (typeof e?.code === 'number') return { Custom: e.code }
  return 'BorshIoError'
}

/**
 * One LiteSVM `err()` value as JSON.
 *
 * @example
 * ```ts
 * transactionErrorJson(7) // 'BlockhashNotFound'
 * ```
 */
export function transactionErrorJson(err: unknown): unknown {
  if (typeof err === 'number') return transactionErrors[err] ?? `TransactionError${err}`
  const e = err as { index?: number; err?: () => unknown; accountIndex?: number; constructor?: { name?: string } }
  if (typeof e?.err === 'function') return { InstructionError: [e.index, instructionErrorJson(e.err())] }
  const name = e?.constructor?.name ?? ''
  if (name.includes('DuplicateInstruction')) return { DuplicateInstruction: e.index }
  if (name.includes('InsufficientFundsForRent')) return { InsufficientFundsForRent: { account_index: e.accountIndex } }
  if (name.includes('ProgramExecutionTemporarilyRestricted')) return { ProgramExecutionTemporarilyRestricted: { account_index: e.accountIndex } }
  return String(err)
}
