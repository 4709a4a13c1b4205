//! Redis 7.0's error texts for scripting, in one place so the runtime and the server reply
//! with the same words (clients and test suites match on them). Each constant is the full
//! error line without the leading `-`.

/// EVALSHA / FCALL of a script the cache does not hold.
pub const NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";
/// `numkeys` larger than the arguments that follow it.
pub const NUMKEYS_TOO_BIG: &str = "ERR Number of keys can't be greater than number of args";
/// `numkeys` below zero.
pub const NUMKEYS_NEGATIVE: &str = "ERR Number of keys can't be negative";
/// `numkeys` that is not an integer.
pub const NOT_AN_INTEGER: &str = "ERR value is not an integer or out of range";
/// What the host should answer for an unknown command called from a script.
pub const UNKNOWN_COMMAND: &str = "ERR Unknown Redis command called from script";
/// What the host should answer for a wrong argument count from a script.
pub const WRONG_ARITY: &str = "ERR Wrong number of args calling Redis command from script";
/// What the host should answer for a command flagged `noscript` (MULTI, WATCH, SUBSCRIBE...).
pub const NOT_ALLOWED: &str = "ERR This Redis command is not allowed from script";
/// What the host should answer for a write from a `no-writes` script or `EVAL_RO`.
pub const WRITE_FROM_READONLY: &str = "ERR Write commands are not allowed from read-only scripts.";
/// Reply to other clients while an EVAL script runs past the busy threshold.
pub const BUSY_EVAL: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
/// Reply to other clients while a function runs past the busy threshold.
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";
/// SCRIPT KILL / FUNCTION KILL with nothing running.
pub const NOTBUSY: &str = "NOTBUSY No scripts in execution right now.";
/// SCRIPT KILL of a script that already wrote.
pub const UNKILLABLE: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";
/// The error a killed script ends with.
pub const SCRIPT_KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";
/// FCALL of a name no library registered.
pub const FUNCTION_NOT_FOUND: &str = "ERR Function not found";
/// FUNCTION DELETE of a library that is not loaded.
pub const LIBRARY_NOT_FOUND: &str = "ERR Library not found";
/// FUNCTION RESTORE of a payload this runtime did not write.
pub const BAD_PAYLOAD: &str = "ERR payload version or checksum are wrong";
/// EVAL_RO / EVALSHA_RO / FCALL_RO of a script or function without `no-writes`.
pub const RO_WITH_WRITE_FLAG: &str =
    "ERR Can not execute a script with write flag using *_ro command.";
/// FCALL with a `numkeys` that is not an integer.
pub const BAD_NUMKEYS: &str = "ERR Bad number of keys provided";
