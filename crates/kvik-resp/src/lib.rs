//! RESP2/RESP3 framing for kvik: parsing what arrives on a socket and encoding what leaves it.
//!
//! The crate does no I/O and keeps no connection state beyond the resumable
//! [`RequestParser`], so the server's event loop and the client library can both own their
//! buffers and decide when to read, write and close.
//!
//! Two parsers exist because the two sides have opposite needs. The server parses requests on
//! its hot path: [`RequestParser`] mirrors Redis 7.0's `networking.c` error for error (clients
//! and test suites compare the exact texts), hands out spans into the caller's buffer instead of
//! copies, and resumes where it stopped so a large request arriving in small reads is scanned
//! once. The client parses replies, which are usually small: [`parse_frame`] accepts every
//! RESP2/RESP3 type and builds an owned [`Frame`] tree, checking limits first so a hostile peer
//! cannot make it allocate by declaring huge lengths.
//!
//! # Layout
//!
//! - [`limits`]: [`Limits`] and the Redis default sizes, shared by both parsers.
//! - [`error`]: [`ProtocolError`], whose `Display` is the exact Redis reply text.
//! - [`request`]: [`RequestParser`], the server-side multibulk/inline request parser.
//! - [`frame`]: [`Frame`], an owned RESP value, and its encoder.
//! - [`parse`]: [`parse_frame`], the generic RESP2/RESP3 reply parser.
//! - [`encode`]: free functions appending replies and commands to a `Vec<u8>`, with the
//!   RESP2 fallbacks Redis uses for RESP3-only types.
//! - [`double`]: Redis-compatible number text: `%.17g`, the INCRBYFLOAT format, and the
//!   `string2ll` / `strtod` acceptance rules.

#![deny(missing_docs, missing_debug_implementations)]

pub mod cluster;
pub mod double;
pub mod encode;
pub mod error;
pub mod frame;
pub mod limits;
pub mod parse;
pub mod request;
pub mod topology;

pub use double::{format_g17, format_human, parse_i64, parse_redis_double};
pub use error::ProtocolError;
pub use frame::Frame;
pub use limits::{Limits, DEFAULT_MAX_BULK_LEN, MAX_INLINE_LEN};
pub use parse::parse_frame;
pub use request::{Request, RequestArgs, RequestParser};

/// The protocol version a connection speaks, chosen by `HELLO`.
///
/// It only matters when encoding: RESP3-only types (maps, sets, doubles, booleans...) have a
/// RESP2 fallback shape, and the server must pick the one the client negotiated. Parsers accept
/// both versions regardless.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Proto {
    /// RESP2, what every connection starts with.
    #[default]
    Resp2,
    /// RESP3, after `HELLO 3`.
    Resp3,
}
