//! [`Error`]: everything a kvik-client call can fail with.
//!
//! The variants keep apart the cases a caller handles differently: a server's error reply (the
//! command ran and said no), a timeout before the command was written (it never ran) or after
//! (it may have run), and a broken connection (every command in flight on it fails with the
//! same reason; none is replayed unless the caller asked for retries of idempotent commands).

use std::fmt;
use std::io;

use kvik_resp::ProtocolError;

/// A kvik-client error.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Connecting failed (refused, unreachable, DNS, connect timeout).
    Connect(io::Error),
    /// The server answered with an error reply (`-ERR ...`, `-WRONGTYPE ...`): the text in full.
    Server(String),
    /// The caller's deadline passed. `sent` tells whether the command had already been handed
    /// to the socket: when false it never reached the server; when true it may have run. Its
    /// late reply, if any, is discarded and never given to another caller.
    Timeout {
        /// Whether the command was written before the deadline passed.
        sent: bool,
    },
    /// The connection broke (EOF, reset, write failure, protocol desync) or was closed. Every
    /// command queued or in flight on it fails with this; the text says why.
    ConnectionClosed(String),
    /// The server sent bytes that are not valid RESP; the connection is dropped.
    Protocol(ProtocolError),
    /// The reply had a type the typed helper did not expect.
    UnexpectedReply(String),
    /// The command is refused on a shared (multiplexed) connection: blocking commands
    /// (BLPOP...), MULTI/EXEC/WATCH, SUBSCRIBE, MONITOR, SELECT... would stall or corrupt every
    /// other caller's stream. Use an atomic [`Pipeline`](crate::Pipeline) for transactions and a
    /// dedicated connection (`ConnectOptions::allow_blocking`) for blocking commands.
    Refused(String),
    /// A server of a sharded client is marked down after a failure and is not retried before
    /// its backoff ends.
    ServerDown(String),
    /// Cluster routing failed (no slot map, too many redirects, CROSSSLOT after splitting...).
    Cluster(String),
    /// The client was configured without any server.
    NoServers,
}

impl Error {
    /// True when the failure came from the transport (connect failure or broken connection),
    /// i.e. when retrying an idempotent command on a fresh connection makes sense.
    pub fn is_connection_error(&self) -> bool {
        matches!(self, Error::Connect(_) | Error::ConnectionClosed(_))
    }

    /// True for [`Error::Timeout`].
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout { .. })
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Connect(e) => write!(f, "connect failed: {e}"),
            Error::Server(s) => f.write_str(s),
            Error::Timeout { sent: false } => {
                f.write_str("timed out before the command was sent (it did not run)")
            }
            Error::Timeout { sent: true } => {
                f.write_str("timed out waiting for the reply (the command may have run)")
            }
            Error::ConnectionClosed(why) => write!(f, "connection closed: {why}"),
            Error::Protocol(e) => write!(f, "{e}"),
            Error::UnexpectedReply(s) => write!(f, "unexpected reply: {s}"),
            Error::Refused(s) => write!(f, "refused on a shared connection: {s}"),
            Error::ServerDown(s) => write!(f, "server {s} is marked down"),
            Error::Cluster(s) => write!(f, "cluster: {s}"),
            Error::NoServers => f.write_str("no servers configured"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Connect(e) => Some(e),
            Error::Protocol(e) => Some(e),
            _ => None,
        }
    }
}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
