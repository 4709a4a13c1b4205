//! A connection to one node whose every step has a deadline: connect, AUTH, each request's
//! write and its reply.
//!
//! The `redis` crate's blocking connection sends its setup commands (CLIENT SETINFO) before a
//! read timeout can be set, so a node that stops answering between accepting the connection
//! and that setup (a stopped or stalled process: the kernel still accepts) blocks the caller
//! for as long as the node stays stopped. For the controller that is the worst moment: its
//! loop would hang in a probe of the very primary it should fail over. Here the socket has its
//! timeouts before the first byte is sent, and the `redis` crate only encodes commands and
//! parses replies.

use redis::{Cmd, RedisResult, Value};
use std::io::Write;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

pub struct Link {
    stream: TcpStream,
    parser: redis::Parser,
    /// A request failed on the socket (a timeout, a reset): a late reply may still come, so the
    /// link answers nothing more (the caller connects again).
    broken: bool,
}

impl Link {
    /// Connects to `host:port` within `timeout` (reads and writes get the same deadline) and
    /// authenticates with `password` (and `user`) if given.
    pub fn open(
        host: &str,
        port: u16,
        timeout: Duration,
        user: Option<&str>,
        password: Option<&str>,
    ) -> Result<Link, String> {
        let target = (host, port)
            .to_socket_addrs()
            .map_err(|e| e.to_string())?
            .next()
            .ok_or("no address")?;
        let stream = TcpStream::connect_timeout(&target, timeout).map_err(|e| e.to_string())?;
        stream
            .set_read_timeout(Some(timeout))
            .and_then(|()| stream.set_write_timeout(Some(timeout)))
            .and_then(|()| stream.set_nodelay(true))
            .map_err(|e| e.to_string())?;
        let mut link = Link {
            stream,
            parser: redis::Parser::new(),
            broken: false,
        };
        if let Some(password) = password {
            let mut auth = redis::cmd("AUTH");
            if let Some(user) = user {
                auth.arg(user);
            }
            auth.arg(password);
            link.request(&auth).map_err(|e| error_text(&e))?;
        }
        Ok(link)
    }

    /// Sends `cmd` and reads its reply; an error reply is an `Err`.
    pub fn request(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        if self.broken {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "the connection failed earlier",
            )
            .into());
        }
        let reply = self
            .stream
            .write_all(&cmd.get_packed_command())
            .map_err(redis::RedisError::from)
            .and_then(|()| self.parser.parse_value(&mut self.stream));
        if reply.is_err() {
            self.broken = true;
        }
        reply?.extract_error()
    }

    /// The deadline of each reply from now on (MIGRATE may take longer than a probe).
    pub fn set_read_timeout(&self, timeout: Duration) -> std::io::Result<()> {
        self.stream.set_read_timeout(Some(timeout))
    }
}

/// The text of an error reply or failure, as the node said it ("ERR ...", "IOERR ...").
pub fn error_text(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    /// A listener that accepts and never answers, as a stopped process's socket does (the
    /// kernel completes the handshake): every step of the link must give up by its deadline.
    #[test]
    fn a_node_that_accepts_and_never_answers_fails_within_the_timeout() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let held = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut sink = Vec::new();
            let _ = s.read_to_end(&mut sink);
        });
        // With a password, the AUTH is the first request: it must not wait past its deadline.
        // (On a thread, so a link that waits for ever fails the test instead of hanging it.)
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let opened = Link::open(
                "127.0.0.1",
                port,
                Duration::from_millis(200),
                None,
                Some("pw"),
            );
            tx.send(opened.map(|_| ())).unwrap();
        });
        let opened = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the link still waits for a silent node after 30 s");
        assert!(opened.is_err(), "AUTH to a silent node succeeded");
        held.join().unwrap();
    }

    #[test]
    fn error_replies_are_errors_and_a_failed_link_answers_nothing_more() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = [0u8; 256];
            let _ = s.read(&mut buf).unwrap();
            s.write_all(b"+PONG\r\n").unwrap();
            let _ = s.read(&mut buf).unwrap();
            s.write_all(b"-ERR unknown command\r\n").unwrap();
            // Then silence: the next request times out.
            let _ = s.read(&mut buf);
            let _ = s.read(&mut buf);
        });
        let mut link =
            Link::open("127.0.0.1", port, Duration::from_millis(300), None, None).unwrap();
        assert_eq!(
            link.request(&redis::cmd("PING")).unwrap(),
            Value::SimpleString("PONG".into())
        );
        let e = link.request(&redis::cmd("NOPE")).unwrap_err();
        assert_eq!(error_text(&e), "ERR unknown command");
        assert!(link.request(&redis::cmd("PING")).is_err(), "a silent node");
        assert!(link.request(&redis::cmd("PING")).is_err(), "a broken link");
        drop(link);
        server.join().unwrap();
    }
}
