//! Size limits shared by the request parser and the frame parser.
//!
//! Every length a peer declares is checked against these before anything is allocated or
//! waited for, so declaring a huge length costs the peer an error, not us memory.

/// Largest bulk string accepted by default; Redis's `proto-max-bulk-len` default.
pub const DEFAULT_MAX_BULK_LEN: u64 = 512 * 1024 * 1024;

/// Longest inline request or length line; Redis's `PROTO_INLINE_MAX_SIZE`.
pub const MAX_INLINE_LEN: usize = 64 * 1024;

/// Limits applied while parsing; one value is usually shared by all connections.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Largest bulk string length accepted (`proto-max-bulk-len`).
    pub max_bulk_len: u64,
    /// Largest element count accepted for an aggregate. Redis rejects counts above `INT_MAX`.
    pub max_multibulk_len: u64,
    /// Longest inline request and longest `*`/`$` length line, in bytes.
    pub max_inline_len: usize,
    /// Deepest aggregate nesting [`parse_frame`](crate::parse_frame) accepts; it recurses, so
    /// this bounds its stack use too.
    pub max_depth: usize,
    /// When false, Redis's pre-authentication limits also apply: at most 10 arguments and
    /// 16384-byte arguments, so an unauthenticated peer cannot make the server buffer much.
    pub authenticated: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: DEFAULT_MAX_BULK_LEN,
            max_multibulk_len: i32::MAX as u64,
            max_inline_len: MAX_INLINE_LEN,
            max_depth: 128,
            authenticated: true,
        }
    }
}

/// Argument count above which an unauthenticated multibulk request is refused.
pub(crate) const UNAUTH_MAX_MULTIBULK_LEN: i64 = 10;

/// Argument length above which an unauthenticated bulk argument is refused.
pub(crate) const UNAUTH_MAX_BULK_LEN: i64 = 16384;
