//! Command errors as Redis names them: a kind (the error code, the first word on the wire) and
//! a message. The wire text is `<PREFIX> <message>`, exactly Redis's; INFO errorstats counts
//! errors by the kind's prefix. This module sits at the bottom of the crate: it imports nothing
//! from the command, network, session, stats or cluster layers.

use crate::storage::StorageError;
use std::borrow::Cow;
use std::fmt;

/// Redis's error codes (the first word of an error reply).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    Err,
    WrongType,
    Moved,
    Ask,
    CrossSlot,
    TryAgain,
    ClusterDown,
    NoAuth,
    WrongPass,
    NoPerm,
    NoProto,
    ExecAbort,
    Busy,
    BusyKey,
    ReadOnly,
    /// Writes refused while the disk cannot take them (`storage::health`).
    MisConf,
    /// A write refused under `min-replicas-to-write`.
    NoReplicas,
    NoScript,
    NotBusy,
    Unkillable,
    IoErr,
    Unblocked,
    /// A stored value that does not decode (a corrupt HyperLogLog).
    InvalidObj,
    /// A stream consumer group that does not exist.
    NoGroup,
    /// XGROUP CREATE of a group that exists.
    BusyGroup,
    /// RocksDB failed; sent as an `ERR storage error: ...` reply (and logged).
    Storage,
    /// A command run on an I/O thread ([`crate::cmd::ctx::Mode::NoWait`]) would have to wait
    /// (a lock, a disk read, a write stall): it stopped before any effect and runs in the pool
    /// instead. Never sent to a client.
    WouldBlock,
    /// [`ErrorKind::WouldBlock`] because another thread holds a key the command needs (past
    /// the I/O thread's wait, `cmd::ctx::io_thread_lock_wait`), or wrote one while a read
    /// without its lock ran (`cmd::isolation::RtcRead`): the holder lets go within a turn, so the I/O thread tries the command again on its next turn before it hands it to
    /// the pool (`rtc-lock-retries`). Never sent to a client.
    KeyBusy,
}

impl ErrorKind {
    /// The command stopped before any effect because it would wait: [`ErrorKind::WouldBlock`]
    /// or [`ErrorKind::KeyBusy`].
    pub const fn waits(self) -> bool {
        matches!(self, ErrorKind::WouldBlock | ErrorKind::KeyBusy)
    }

    /// The code written on the wire before the message.
    pub const fn prefix(self) -> &'static str {
        match self {
            ErrorKind::Err | ErrorKind::Storage | ErrorKind::WouldBlock | ErrorKind::KeyBusy => {
                "ERR"
            }
            ErrorKind::WrongType => "WRONGTYPE",
            ErrorKind::Moved => "MOVED",
            ErrorKind::Ask => "ASK",
            ErrorKind::CrossSlot => "CROSSSLOT",
            ErrorKind::TryAgain => "TRYAGAIN",
            ErrorKind::ClusterDown => "CLUSTERDOWN",
            ErrorKind::NoAuth => "NOAUTH",
            ErrorKind::WrongPass => "WRONGPASS",
            ErrorKind::NoPerm => "NOPERM",
            ErrorKind::NoProto => "NOPROTO",
            ErrorKind::ExecAbort => "EXECABORT",
            ErrorKind::Busy => "BUSY",
            ErrorKind::BusyKey => "BUSYKEY",
            ErrorKind::ReadOnly => "READONLY",
            ErrorKind::MisConf => "MISCONF",
            ErrorKind::NoReplicas => "NOREPLICAS",
            ErrorKind::NoScript => "NOSCRIPT",
            ErrorKind::NotBusy => "NOTBUSY",
            ErrorKind::Unkillable => "UNKILLABLE",
            ErrorKind::IoErr => "IOERR",
            ErrorKind::Unblocked => "UNBLOCKED",
            ErrorKind::InvalidObj => "INVALIDOBJ",
            ErrorKind::NoGroup => "NOGROUP",
            ErrorKind::BusyGroup => "BUSYGROUP",
        }
    }
}

/// Result of a command handler: `Ok` once it has written its reply.
pub type CmdResult = Result<(), CmdError>;

/// An error reply: its kind and its message (without the prefix).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CmdError {
    pub kind: ErrorKind,
    message: Cow<'static, str>,
}

impl CmdError {
    /// An error with a fixed message.
    pub const fn new(kind: ErrorKind, message: &'static str) -> CmdError {
        CmdError {
            kind,
            message: Cow::Borrowed(message),
        }
    }
    /// An error with a formatted message.
    pub fn with(kind: ErrorKind, message: impl fmt::Display) -> CmdError {
        CmdError {
            kind,
            message: Cow::Owned(message.to_string()),
        }
    }
    /// `ERR` with a fixed message.
    pub const fn fixed(message: &'static str) -> CmdError {
        CmdError::new(ErrorKind::Err, message)
    }
    /// `ERR` with a formatted message.
    pub fn err(message: impl fmt::Display) -> CmdError {
        CmdError::with(ErrorKind::Err, message)
    }
    pub const fn syntax() -> CmdError {
        CmdError::fixed("syntax error")
    }
    pub const fn not_integer() -> CmdError {
        CmdError::fixed("value is not an integer or out of range")
    }
    pub const fn not_float() -> CmdError {
        CmdError::fixed("value is not a valid float")
    }
    pub const fn wrong_type() -> CmdError {
        CmdError::new(
            ErrorKind::WrongType,
            "Operation against a key holding the wrong kind of value",
        )
    }
    pub const fn no_such_key() -> CmdError {
        CmdError::fixed("no such key")
    }
    pub const fn overflow() -> CmdError {
        CmdError::fixed("increment or decrement would overflow")
    }
    pub const fn db_out_of_range() -> CmdError {
        CmdError::fixed("DB index is out of range")
    }
    pub const fn noauth() -> CmdError {
        CmdError::new(ErrorKind::NoAuth, "Authentication required.")
    }
    /// "ERR wrong number of arguments for 'name' command".
    pub fn wrong_args(name: &str) -> CmdError {
        CmdError::err(format_args!(
            "wrong number of arguments for '{name}' command"
        ))
    }
    /// A storage failure (logged here, once).
    /// See [`ErrorKind::WouldBlock`].
    pub const WOULD_BLOCK: CmdError = CmdError::new(ErrorKind::WouldBlock, "would block");
    /// See [`ErrorKind::KeyBusy`].
    pub const KEY_BUSY: CmdError = CmdError::new(ErrorKind::KeyBusy, "key busy");

    pub fn storage(e: impl fmt::Display) -> CmdError {
        tracing::error!(error = %e, "storage error");
        CmdError::with(ErrorKind::Storage, format_args!("storage error: {e}"))
    }
    /// An error from a full Redis error line (`NOSCRIPT No matching script...`), as the
    /// scripting runtime words them; an unknown code stays part of an `ERR` message.
    pub fn from_line(line: &str) -> CmdError {
        const KINDS: &[ErrorKind] = &[
            ErrorKind::Err,
            ErrorKind::WrongType,
            ErrorKind::CrossSlot,
            ErrorKind::Busy,
            ErrorKind::NoScript,
            ErrorKind::NotBusy,
            ErrorKind::Unkillable,
            ErrorKind::ReadOnly,
            ErrorKind::MisConf,
            ErrorKind::NoReplicas,
        ];
        let (code, message) = line.split_once(' ').unwrap_or((line, ""));
        match KINDS.iter().find(|k| k.prefix() == code) {
            Some(&kind) => CmdError::with(kind, message),
            None => CmdError::err(line),
        }
    }
    /// The error code, as INFO errorstats groups errors.
    pub fn prefix(&self) -> &'static str {
        self.kind.prefix()
    }
    /// The message, without the prefix.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// RocksDB's `Incomplete` is what a read limited to memory or a write refused to stall
/// returns: the command must wait, which [`ErrorKind::WouldBlock`] says.
impl From<StorageError> for CmdError {
    fn from(e: StorageError) -> CmdError {
        if e.kind() == rocksdb::ErrorKind::Incomplete {
            return CmdError::WOULD_BLOCK;
        }
        CmdError::storage(e)
    }
}

/// The value algorithms of `kvik-types` print their errors as Redis's reply text (code first);
/// these split that text back into a kind and a message.
fn from_reply_text(text: &str) -> CmdError {
    const KINDS: &[ErrorKind] = &[ErrorKind::WrongType, ErrorKind::InvalidObj, ErrorKind::Err];
    let (code, message) = text.split_once(' ').unwrap_or(("ERR", text));
    let kind = KINDS
        .iter()
        .copied()
        .find(|k| k.prefix() == code)
        .unwrap_or(ErrorKind::Err);
    CmdError::with(kind, message)
}

impl From<kvik_types::hll::HllError> for CmdError {
    fn from(e: kvik_types::hll::HllError) -> CmdError {
        from_reply_text(&e.to_string())
    }
}

impl From<kvik_types::bits::BitError> for CmdError {
    fn from(e: kvik_types::bits::BitError) -> CmdError {
        from_reply_text(&e.to_string())
    }
}

impl From<kvik_types::geo::GeoError> for CmdError {
    fn from(e: kvik_types::geo::GeoError) -> CmdError {
        from_reply_text(&e.to_string())
    }
}

/// The wire text: `<PREFIX> <message>`.
impl fmt::Display for CmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.prefix(), self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_text_is_prefix_then_message() {
        assert_eq!(CmdError::syntax().to_string(), "ERR syntax error");
        assert_eq!(
            CmdError::wrong_type().to_string(),
            "WRONGTYPE Operation against a key holding the wrong kind of value"
        );
        assert_eq!(
            CmdError::storage("disk").to_string(),
            "ERR storage error: disk"
        );
        assert_eq!(CmdError::storage("disk").prefix(), "ERR");
        let moved = CmdError::with(ErrorKind::Moved, format_args!("{} {}:{}", 7, "h", 1));
        assert_eq!(moved.to_string(), "MOVED 7 h:1");
    }

    #[test]
    fn value_algorithm_errors_keep_their_code() {
        let e = CmdError::from(kvik_types::hll::HllError::NotHll);
        assert_eq!(e.kind, ErrorKind::WrongType);
        assert_eq!(
            e.to_string(),
            "WRONGTYPE Key is not a valid HyperLogLog string value."
        );
        let e = CmdError::from(kvik_types::hll::HllError::Corrupt);
        assert_eq!(e.to_string(), "INVALIDOBJ Corrupted HLL object detected");
        let e = CmdError::from(kvik_types::bits::BitError::Syntax);
        assert_eq!(e, CmdError::syntax());
    }
}
