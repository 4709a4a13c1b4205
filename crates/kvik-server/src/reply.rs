//! The shared vocabulary of a command's input and output: [`Args`] (the request) and [`Reply`]
//! (the reply writer, RESP2 or RESP3). It sits at the bottom of the crate with [`crate::error`]:
//! the network layer, the dispatcher, stats and blocking all speak it without importing each
//! other.

use crate::error::CmdError;
use bytes::Bytes;
use kvik_resp::{encode, Proto};

/// A command's arguments; `args[0]` is the command name as the client sent it.
pub type Args = [Bytes];

/// The reply being built for one run of commands; replies are appended in command order.
#[derive(Debug)]
pub struct Reply {
    pub buf: Vec<u8>,
    pub proto: Proto,
}

impl Reply {
    pub fn new(proto: Proto) -> Reply {
        Reply {
            buf: Vec::with_capacity(256),
            proto,
        }
    }
    pub fn ok(&mut self) {
        self.buf.extend_from_slice(b"+OK\r\n");
    }
    pub fn simple(&mut self, s: &str) {
        encode::simple(&mut self.buf, s.as_bytes());
    }
    /// An error reply: `-<PREFIX> <message>\r\n`.
    pub fn error(&mut self, e: &CmdError) {
        let at = self.buf.len() + 1;
        encode::error(&mut self.buf, e.message().as_bytes());
        let prefix = e.prefix().as_bytes();
        self.buf
            .splice(at..at, prefix.iter().copied().chain([b' ']));
    }
    pub fn int(&mut self, n: i64) {
        encode::integer(&mut self.buf, n);
    }
    pub fn bulk(&mut self, b: &[u8]) {
        encode::bulk(&mut self.buf, b);
    }
    /// A bulk string of `len` bytes that `fill` appends to the buffer piece by piece (a value
    /// copied from storage straight into the reply). On an error nothing is left of it.
    pub fn bulk_from<E>(
        &mut self,
        len: u64,
        fill: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<(), E> {
        let at = self.buf.len();
        self.buf.reserve(len as usize + 16);
        encode::bulk_header(&mut self.buf, len);
        let body = self.buf.len();
        match fill(&mut self.buf) {
            Ok(()) => {
                debug_assert_eq!((self.buf.len() - body) as u64, len);
                self.buf.extend_from_slice(b"\r\n");
                Ok(())
            }
            Err(e) => {
                self.buf.truncate(at);
                Err(e)
            }
        }
    }
    /// A bulk string, or the null bulk string for `None`.
    pub fn bulk_or_null(&mut self, b: Option<&[u8]>) {
        match b {
            Some(b) => self.bulk(b),
            None => self.null(),
        }
    }
    pub fn null(&mut self) {
        encode::null(&mut self.buf, self.proto);
    }
    pub fn null_array(&mut self) {
        encode::null_array(&mut self.buf, self.proto);
    }
    pub fn array(&mut self, n: usize) {
        encode::array_header(&mut self.buf, n);
    }
    pub fn map(&mut self, pairs: usize) {
        encode::map_header(&mut self.buf, pairs, self.proto);
    }
    pub fn set(&mut self, n: usize) {
        encode::set_header(&mut self.buf, n, self.proto);
    }
    pub fn double(&mut self, d: f64) {
        encode::double(&mut self.buf, d, self.proto);
    }
    pub fn boolean(&mut self, b: bool) {
        encode::boolean(&mut self.buf, b, self.proto);
    }
    pub fn verbatim(&mut self, text: &[u8]) {
        encode::verbatim(&mut self.buf, b"txt", text, self.proto);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn error_reply_is_prefix_message_and_one_line() {
        let mut r = Reply::new(Proto::Resp2);
        r.ok();
        r.error(&CmdError::wrong_type());
        r.error(&CmdError::with(ErrorKind::Moved, "12 h:1\r\nx"));
        assert_eq!(
            String::from_utf8(r.buf).unwrap(),
            "+OK\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n\
             -MOVED 12 h:1  x\r\n"
        );
    }
}
