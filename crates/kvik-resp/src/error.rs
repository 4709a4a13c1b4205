//! Protocol errors, rendered exactly as Redis renders them.
//!
//! Redis clients and test suites match on the reply text, so the server's request errors
//! reproduce Redis 7.0's strings byte for byte. The reply-parsing errors have no Redis
//! counterpart and use texts in the same style.

use std::fmt;

/// A malformed or over-limit frame. After one, the stream cannot be resynchronised: the server
/// replies with the text and closes, the client drops the connection.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProtocolError {
    /// `*` count not a number, or above the limit.
    InvalidMultibulkLength,
    /// `$` length not a number, negative, or above the limit.
    InvalidBulkLength,
    /// More than 10 arguments before authentication.
    UnauthenticatedMultibulkLength,
    /// An argument longer than 16384 bytes before authentication.
    UnauthenticatedBulkLength,
    /// A multibulk argument did not start with `$`; holds the byte found instead.
    ExpectedDollar(u8),
    /// No end of the `*` count line within the inline limit.
    TooBigMultibulkCount,
    /// No end of a `$` length line within the inline limit.
    TooBigBulkCount,
    /// No newline within the inline limit.
    TooBigInline,
    /// An inline request with an unterminated quote, or a closing quote glued to more text.
    UnbalancedQuotes,
    /// A reply started with a byte that is not a RESP2/RESP3 type marker.
    InvalidFrameType(u8),
    /// A `:` integer that is not a valid signed 64-bit number.
    InvalidInteger,
    /// A `,` double that is not a valid number.
    InvalidDouble,
    /// A `#` boolean other than `t` or `f`.
    InvalidBoolean,
    /// A `(` big number that is not an optionally signed run of digits.
    InvalidBigNumber,
    /// A `_` null with something on its line.
    InvalidNull,
    /// A `=` verbatim string without its `xxx:` format prefix.
    InvalidVerbatim,
    /// A line or bulk payload not terminated by `\r\n`.
    InvalidLineEnding,
    /// A reply line longer than the limit.
    TooBigLine,
    /// Aggregates nested deeper than [`Limits::max_depth`](crate::Limits::max_depth).
    TooDeep,
}

impl ProtocolError {
    /// The exact reply bytes, for the server's error reply.
    ///
    /// Differs from `to_string()` only for [`ProtocolError::ExpectedDollar`] with a non-ASCII
    /// byte: Redis formats it with `%c`, emitting the raw byte, which a Rust `String` cannot
    /// hold as is.
    pub fn message_bytes(&self) -> Vec<u8> {
        match self {
            ProtocolError::ExpectedDollar(b) => {
                let mut v = b"Protocol error: expected '$', got '".to_vec();
                v.push(*b);
                v.push(b'\'');
                v
            }
            other => other.to_string().into_bytes(),
        }
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            ProtocolError::InvalidMultibulkLength => "invalid multibulk length",
            ProtocolError::InvalidBulkLength => "invalid bulk length",
            ProtocolError::UnauthenticatedMultibulkLength => "unauthenticated multibulk length",
            ProtocolError::UnauthenticatedBulkLength => "unauthenticated bulk length",
            ProtocolError::ExpectedDollar(b) => {
                return write!(f, "Protocol error: expected '$', got '{}'", *b as char)
            }
            ProtocolError::TooBigMultibulkCount => "too big mbulk count string",
            ProtocolError::TooBigBulkCount => "too big bulk count string",
            ProtocolError::TooBigInline => "too big inline request",
            ProtocolError::UnbalancedQuotes => "unbalanced quotes in request",
            ProtocolError::InvalidFrameType(b) => {
                return write!(f, "Protocol error: invalid frame type byte 0x{b:02x}")
            }
            ProtocolError::InvalidInteger => "invalid integer",
            ProtocolError::InvalidDouble => "invalid double",
            ProtocolError::InvalidBoolean => "invalid boolean",
            ProtocolError::InvalidBigNumber => "invalid big number",
            ProtocolError::InvalidNull => "invalid null",
            ProtocolError::InvalidVerbatim => "invalid verbatim string",
            ProtocolError::InvalidLineEnding => "expected CRLF line ending",
            ProtocolError::TooBigLine => "too big line",
            ProtocolError::TooDeep => "too deeply nested aggregate",
        };
        write!(f, "Protocol error: {text}")
    }
}

impl std::error::Error for ProtocolError {}

#[cfg(test)]
mod tests {
    use super::ProtocolError::*;
    use super::*;

    #[test]
    fn redis_texts_are_exact() {
        let cases: &[(ProtocolError, &str)] = &[
            (
                InvalidMultibulkLength,
                "Protocol error: invalid multibulk length",
            ),
            (InvalidBulkLength, "Protocol error: invalid bulk length"),
            (
                UnauthenticatedMultibulkLength,
                "Protocol error: unauthenticated multibulk length",
            ),
            (
                UnauthenticatedBulkLength,
                "Protocol error: unauthenticated bulk length",
            ),
            (
                ExpectedDollar(b'x'),
                "Protocol error: expected '$', got 'x'",
            ),
            (
                TooBigMultibulkCount,
                "Protocol error: too big mbulk count string",
            ),
            (TooBigBulkCount, "Protocol error: too big bulk count string"),
            (TooBigInline, "Protocol error: too big inline request"),
            (
                UnbalancedQuotes,
                "Protocol error: unbalanced quotes in request",
            ),
        ];
        for (e, text) in cases {
            assert_eq!(e.to_string(), *text);
            assert_eq!(e.message_bytes(), text.as_bytes());
        }
    }

    #[test]
    fn expected_dollar_keeps_raw_byte() {
        let e = ExpectedDollar(0xff);
        assert_eq!(
            e.message_bytes(),
            b"Protocol error: expected '$', got '\xff'"
        );
    }
}
