//! Integration tests: the wire protocol (RESP2/RESP3, inline commands, pipelining, AUTH, SELECT,
//! QUIT, RESET), bad input of every kind, per-client limits, and the real redis-cli and
//! redis-benchmark against kvik.
//!
//! Every bad-input test checks three things: Redis's exact error text, that the connection is
//! closed where Redis closes it (read until EOF), and that the server still serves a fresh
//! connection afterwards.

use crate::common::{read_raw, resp, roundtrip_raw, Endpoint, TestServer};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A decoded reply, enough of RESP2 and RESP3 for these tests.
#[derive(Debug, Clone, PartialEq)]
enum V {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    /// `$-1`, `*-1` or RESP3 `_`.
    Nil,
    Array(Vec<V>),
    /// RESP3 `%`.
    Map(Vec<(V, V)>),
}

impl V {
    fn bulk(s: &str) -> V {
        V::Bulk(s.as_bytes().to_vec())
    }
    fn ok() -> V {
        V::Simple("OK".into())
    }
}

fn read_line(r: &mut impl BufRead) -> Vec<u8> {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line).expect("read reply line");
    assert!(
        line.ends_with(b"\r\n"),
        "truncated reply line {:?}",
        String::from_utf8_lossy(&line)
    );
    line.truncate(line.len() - 2);
    line
}

/// Reads one complete reply.
fn read_value(r: &mut impl BufRead) -> V {
    let line = read_line(r);
    let text = String::from_utf8_lossy(&line[1..]).into_owned();
    let int = || text.parse::<i64>().expect("length or integer");
    match line[0] {
        b'+' => V::Simple(text),
        b'-' => V::Error(text),
        b':' => V::Int(int()),
        b'_' => V::Nil,
        b'$' if int() < 0 => V::Nil,
        b'$' => {
            let mut data = vec![0u8; int() as usize + 2];
            r.read_exact(&mut data).expect("bulk payload");
            data.truncate(data.len() - 2);
            V::Bulk(data)
        }
        b'*' if int() < 0 => V::Nil,
        b'*' | b'~' => V::Array((0..int()).map(|_| read_value(r)).collect()),
        b'%' => V::Map((0..int()).map(|_| (read_value(r), read_value(r))).collect()),
        other => panic!("unexpected reply type {:?}", other as char),
    }
}

/// A raw connection with a buffered reader over the same socket.
struct Raw {
    w: TcpStream,
    r: BufReader<TcpStream>,
}

impl Raw {
    fn new(s: &TestServer) -> Raw {
        let w = s.raw();
        let r = BufReader::new(w.try_clone().unwrap());
        Raw { w, r }
    }
    fn send(&mut self, bytes: &[u8]) {
        self.w.write_all(bytes).unwrap();
    }
    fn read(&mut self) -> V {
        read_value(&mut self.r)
    }
    /// Sends a command in RESP form and reads its reply.
    fn cmd(&mut self, args: &[&[u8]]) -> V {
        self.send(&resp(args));
        self.read()
    }
    /// Reads until the server closes the connection; returns what came before.
    fn read_to_eof(&mut self) -> Vec<u8> {
        let mut rest = Vec::new();
        match self.r.read_to_end(&mut rest) {
            Ok(_) => rest,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => rest,
            Err(e) => panic!("expected the server to close the connection, got {e}"),
        }
    }
}

/// The server answers PING on a fresh connection.
fn assert_alive(s: &TestServer) {
    let mut c = Raw::new(s);
    assert_eq!(c.cmd(&[b"PING"]), V::Simple("PONG".into()));
}

/// Sends `input` on a fresh connection and returns everything the server sent before closing
/// it. Fails if the server does not close the connection.
fn send_expect_close(s: &TestServer, input: &[u8]) -> Vec<u8> {
    let mut c = s.raw();
    let (out, closed) = roundtrip_raw(&mut c, input, usize::MAX);
    assert!(
        closed,
        "connection not closed after {:?}; got {:?}",
        String::from_utf8_lossy(&input[..input.len().min(60)]),
        String::from_utf8_lossy(&out)
    );
    out
}

/// Writes `input` from a helper thread (the server may close the connection before reading all
/// of it) while this thread reads the reply until the connection closes.
fn flood_expect_close(s: &TestServer, input: Vec<u8>) -> Vec<u8> {
    let c = s.raw();
    let mut w = c.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = w.write_all(&input); // fails once the server closes: expected
    });
    let mut r = c;
    let (out, closed) = read_raw(&mut r, usize::MAX);
    assert!(
        closed,
        "connection not closed; got {:?}",
        String::from_utf8_lossy(&out)
    );
    let _ = r.shutdown(Shutdown::Both);
    writer.join().unwrap();
    out
}

#[test]
fn inline_commands_and_select() {
    let s = TestServer::start();
    let mut c = Raw::new(&s);
    c.send(b"PING\r\n");
    assert_eq!(c.read(), V::Simple("PONG".into()));
    c.send(b"SET k \"a b\"\r\nGET k\r\n  ECHO   'x y'  \n\r\nPING hi\r\n");
    assert_eq!(c.read(), V::ok());
    assert_eq!(c.read(), V::bulk("a b"));
    assert_eq!(c.read(), V::bulk("x y"));
    assert_eq!(c.read(), V::bulk("hi"));
    // Empty multibulk requests are skipped, as blank inline lines are.
    c.send(b"*0\r\n*-1\r\nPING\r\n");
    assert_eq!(c.read(), V::Simple("PONG".into()));

    // SELECT: databases are separate namespaces.
    assert_eq!(c.cmd(&[b"SELECT", b"1"]), V::ok());
    assert_eq!(c.cmd(&[b"GET", b"k"]), V::Nil);
    assert_eq!(c.cmd(&[b"SET", b"k", b"one"]), V::ok());
    assert_eq!(c.cmd(&[b"SELECT", b"0"]), V::ok());
    assert_eq!(c.cmd(&[b"GET", b"k"]), V::bulk("a b"));
    assert_eq!(
        c.cmd(&[b"SELECT", b"16"]),
        V::Error("ERR DB index is out of range".into())
    );
    assert_eq!(
        c.cmd(&[b"SELECT", b"x"]),
        V::Error("ERR value is not an integer or out of range".into())
    );
    assert_eq!(
        c.cmd(&[b"PING", b"a", b"b"]),
        V::Error("ERR wrong number of arguments for 'ping' command".into())
    );
    assert_eq!(
        c.cmd(&[b"ECHO"]),
        V::Error("ERR wrong number of arguments for 'echo' command".into())
    );
    assert_eq!(
        c.cmd(&[b"AUTH", b"x"]),
        V::Error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?".into())
    );
    // The new-style AUTH of the default user succeeds with any password when none is set.
    assert_eq!(c.cmd(&[b"AUTH", b"default", b"x"]), V::ok());
}

/// Checks a HELLO reply (map in RESP3, flat array in RESP2) and returns its client id.
fn check_hello(reply: V, proto: i64) -> i64 {
    let pairs: Vec<(V, V)> = match reply {
        V::Map(pairs) => {
            assert_eq!(proto, 3);
            pairs
        }
        V::Array(flat) => {
            assert_eq!(proto, 2);
            flat.chunks(2)
                .map(|p| (p[0].clone(), p[1].clone()))
                .collect()
        }
        other => panic!("HELLO replied {other:?}"),
    };
    let keys: Vec<V> = pairs.iter().map(|p| p.0.clone()).collect();
    let expected: Vec<V> = [
        "server", "version", "proto", "id", "mode", "role", "modules",
    ]
    .iter()
    .map(|k| V::bulk(k))
    .collect();
    assert_eq!(keys, expected);
    assert_eq!(pairs[0].1, V::bulk("redis"));
    match &pairs[1].1 {
        V::Bulk(v) => assert_eq!(v.split(|&b| b == b'.').count(), 3, "version {v:?}"),
        other => panic!("version {other:?}"),
    }
    assert_eq!(pairs[2].1, V::Int(proto));
    assert_eq!(pairs[4].1, V::bulk("standalone"));
    assert_eq!(pairs[5].1, V::bulk("master"));
    assert_eq!(pairs[6].1, V::Array(vec![]));
    match pairs[3].1 {
        V::Int(id) => id,
        ref other => panic!("id {other:?}"),
    }
}

#[test]
fn hello_switches_protocol() {
    let s = TestServer::start();
    let mut c = Raw::new(&s);
    // RESP2 by default: a missing key is $-1.
    c.send(&resp(&[b"GET", b"nokey"]));
    assert_eq!(read_line(&mut c.r), b"$-1");
    let id = check_hello(c.cmd(&[b"HELLO", b"3"]), 3);
    assert!(id > 0);
    // RESP3: a missing key is the null type.
    c.send(&resp(&[b"GET", b"nokey"]));
    assert_eq!(read_line(&mut c.r), b"_");
    // The id stays the same; HELLO with no version keeps the protocol.
    assert_eq!(check_hello(c.cmd(&[b"HELLO"]), 3), id);
    assert_eq!(
        check_hello(c.cmd(&[b"HELLO", b"2", b"SETNAME", b"me"]), 2),
        id
    );
    assert_eq!(c.cmd(&[b"CLIENT", b"GETNAME"]), V::bulk("me"));
    c.send(&resp(&[b"GET", b"nokey"]));
    assert_eq!(read_line(&mut c.r), b"$-1");
    assert_eq!(
        c.cmd(&[b"HELLO", b"4"]),
        V::Error("NOPROTO unsupported protocol version".into())
    );
    assert_eq!(
        c.cmd(&[b"HELLO", b"x"]),
        V::Error("ERR Protocol version is not an integer or out of range".into())
    );
    assert_eq!(
        c.cmd(&[b"HELLO", b"3", b"foo"]),
        V::Error("ERR Syntax error in HELLO option 'foo'".into())
    );
    assert_eq!(
        c.cmd(&[b"HELLO", b"3", b"SETNAME", b"a b"]),
        V::Error("ERR Client names cannot contain spaces, newlines or special characters.".into())
    );
    // A failed HELLO changes nothing.
    c.send(&resp(&[b"GET", b"nokey"]));
    assert_eq!(read_line(&mut c.r), b"$-1");
}

#[test]
fn pipeline_of_ten_thousand_commands_in_one_write() {
    let s = TestServer::start();
    let mut c = Raw::new(&s);
    let n = 10_000;
    let mut buf = Vec::new();
    for i in 0..n {
        let key = format!("k{}", i / 3);
        match i % 3 {
            0 => buf.extend(resp(&[b"SET", key.as_bytes(), format!("v{i}").as_bytes()])),
            1 => buf.extend(resp(&[b"GET", key.as_bytes()])),
            _ => buf.extend(resp(&[b"INCR", b"counter"])),
        }
    }
    c.send(&buf);
    let mut incr = 0;
    for i in 0..n {
        let got = c.read();
        let want = match i % 3 {
            0 => V::ok(),
            1 => V::bulk(&format!("v{}", i - 1)),
            _ => {
                incr += 1;
                V::Int(incr)
            }
        };
        assert_eq!(got, want, "reply {i}");
    }
    // The same in inline form, mixed with multibulk.
    let mut buf = Vec::new();
    for i in 0..2000 {
        if i % 2 == 0 {
            buf.extend_from_slice(format!("SET in{i} \"x {i}\"\r\n").as_bytes());
        } else {
            buf.extend(resp(&[b"GET", format!("in{}", i - 1).as_bytes()]));
        }
    }
    c.send(&buf);
    for i in 0..2000 {
        let want = if i % 2 == 0 {
            V::ok()
        } else {
            V::bulk(&format!("x {}", i - 1))
        };
        assert_eq!(c.read(), want, "inline reply {i}");
    }
}

#[test]
fn requirepass_and_auth() {
    let s = TestServer::start_with(&["--requirepass", "s3cret"]);
    let mut c = Raw::new(&s);
    assert_eq!(
        c.cmd(&[b"GET", b"k"]),
        V::Error("NOAUTH Authentication required.".into())
    );
    assert_eq!(
        c.cmd(&[b"HELLO", b"3"]),
        V::Error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time".into())
    );
    let wrongpass =
        V::Error("WRONGPASS invalid username-password pair or user is disabled.".into());
    assert_eq!(c.cmd(&[b"AUTH", b"nope"]), wrongpass);
    assert_eq!(c.cmd(&[b"AUTH", b"default", b"nope"]), wrongpass);
    assert_eq!(c.cmd(&[b"AUTH", b"other", b"s3cret"]), wrongpass);
    assert_eq!(
        c.cmd(&[b"AUTH", b"a", b"b", b"c"]),
        V::Error("ERR syntax error".into())
    );
    assert_eq!(
        c.cmd(&[b"HELLO", b"3", b"AUTH", b"default", b"nope"]),
        wrongpass
    );
    assert_eq!(
        c.cmd(&[b"PING"]),
        V::Error("NOAUTH Authentication required.".into())
    );
    assert_eq!(c.cmd(&[b"AUTH", b"s3cret"]), V::ok());
    assert_eq!(c.cmd(&[b"SET", b"k", b"v"]), V::ok());
    // RESET drops the authentication.
    assert_eq!(c.cmd(&[b"RESET"]), V::Simple("RESET".into()));
    assert_eq!(
        c.cmd(&[b"GET", b"k"]),
        V::Error("NOAUTH Authentication required.".into())
    );

    // HELLO 3 AUTH authenticates and switches protocol at once.
    let mut c = Raw::new(&s);
    check_hello(c.cmd(&[b"HELLO", b"3", b"AUTH", b"default", b"s3cret"]), 3);
    assert_eq!(c.cmd(&[b"GET", b"k"]), V::bulk("v"));

    // AUTH pipelined with a request that only an authenticated client may send: the limits
    // apply to what arrives before the AUTH has run, not to the whole buffer.
    let mut c = Raw::new(&s);
    let big = vec![b'x'; 20_000];
    let mut buf = resp(&[b"AUTH", b"s3cret"]);
    buf.extend(resp(&[b"ECHO", &big]));
    let eleven: Vec<&[u8]> = std::iter::once(&b"MGET"[..])
        .chain(std::iter::repeat_n(&b"k"[..], 10))
        .collect();
    buf.extend(resp(&eleven));
    c.send(&buf);
    assert_eq!(c.read(), V::ok());
    assert_eq!(c.read(), V::Bulk(big));
    assert_eq!(c.read(), V::Array(vec![V::bulk("v"); 10]));

    // Before AUTH: more than 10 arguments or an argument over 16384 bytes is a protocol error.
    let out = send_expect_close(&s, b"*11\r\n");
    assert_eq!(
        out,
        b"-ERR Protocol error: unauthenticated multibulk length\r\n"
    );
    let out = send_expect_close(&s, b"*1\r\n$16385\r\n");
    assert_eq!(out, b"-ERR Protocol error: unauthenticated bulk length\r\n");
    // At the limits the request is parsed (and refused for want of AUTH).
    let mut c = Raw::new(&s);
    let arg = vec![b'y'; 16384];
    assert_eq!(
        c.cmd(&[b"ECHO", &arg]),
        V::Error("NOAUTH Authentication required.".into())
    );
    let ten: Vec<&[u8]> = std::iter::once(&b"MGET"[..])
        .chain(std::iter::repeat_n(&b"k"[..], 9))
        .collect();
    assert_eq!(
        c.cmd(&ten),
        V::Error("NOAUTH Authentication required.".into())
    );
    assert_alive_auth(&s, "s3cret");
}

fn assert_alive_auth(s: &TestServer, pass: &str) {
    let mut c = Raw::new(s);
    assert_eq!(c.cmd(&[b"AUTH", pass.as_bytes()]), V::ok());
    assert_eq!(c.cmd(&[b"PING"]), V::Simple("PONG".into()));
}

#[test]
fn quit_replies_ok_then_closes() {
    let s = TestServer::start();
    let mut c = Raw::new(&s);
    c.send(b"PING\r\nQUIT\r\nSET after quit\r\n");
    assert_eq!(c.read(), V::Simple("PONG".into()));
    assert_eq!(c.read(), V::ok());
    assert_eq!(c.read_to_eof(), b"");
    // Nothing after QUIT ran.
    let mut c = Raw::new(&s);
    assert_eq!(c.cmd(&[b"GET", b"after"]), V::Nil);
}

#[test]
fn reset_restores_connection_defaults() {
    let s = TestServer::start();
    let mut c = Raw::new(&s);
    assert_eq!(c.cmd(&[b"SELECT", b"2"]), V::ok());
    assert_eq!(c.cmd(&[b"SET", b"k", b"db2"]), V::ok());
    check_hello(c.cmd(&[b"HELLO", b"3", b"SETNAME", b"named"]), 3);
    assert_eq!(c.cmd(&[b"RESET"]), V::Simple("RESET".into()));
    // Back to RESP2, database 0, no name.
    c.send(&resp(&[b"GET", b"k"]));
    assert_eq!(read_line(&mut c.r), b"$-1");
    assert_eq!(c.cmd(&[b"CLIENT", b"GETNAME"]), V::Nil);
    assert_eq!(c.cmd(&[b"SELECT", b"2"]), V::ok());
    assert_eq!(c.cmd(&[b"GET", b"k"]), V::bulk("db2"));
}

#[test]
fn protocol_errors_reply_like_redis_and_close() {
    let s = TestServer::start();
    let cases: &[(&[u8], &[u8])] = &[
        (
            b"*1\r\n$1099511627776\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*2147483648\r\n",
            b"-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*1\r\n$-5\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*1\r\n$-1\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*abc\r\n",
            b"-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*1\r\n$x\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*1\r\n:5\r\n",
            b"-ERR Protocol error: expected '$', got ':'\r\n",
        ),
        (
            b"*2\r\n$4\r\nECHO\r\n+x\r\n",
            b"-ERR Protocol error: expected '$', got '+'\r\n",
        ),
        (
            b"SET a \"b\r\n",
            b"-ERR Protocol error: unbalanced quotes in request\r\n",
        ),
        (
            b"SET a 'b'c\r\n",
            b"-ERR Protocol error: unbalanced quotes in request\r\n",
        ),
        // Requests before the bad one still run and answer first.
        (
            b"PING\r\n*1\r\n$4\r\nPING\r\n*1\r\n:5\r\nPING\r\n",
            b"+PONG\r\n+PONG\r\n-ERR Protocol error: expected '$', got ':'\r\n",
        ),
    ];
    for (input, want) in cases {
        let out = send_expect_close(&s, input);
        assert_eq!(
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(want),
            "input {:?}",
            String::from_utf8_lossy(input)
        );
    }
    // A non-ASCII byte where '$' belongs is echoed raw, as Redis's %c does.
    let out = send_expect_close(&s, b"*1\r\n\xff5\r\n");
    assert_eq!(out, b"-ERR Protocol error: expected '$', got '\xff'\r\n");
    // Negative counts are empty requests, skipped.
    let mut c = Raw::new(&s);
    c.send(b"*-5\r\nPING\r\n");
    assert_eq!(c.read(), V::Simple("PONG".into()));
    assert_alive(&s);
}

#[test]
fn oversized_lines_are_refused() {
    let s = TestServer::start();
    // ~1 MB (of a 100 MB line) without a newline.
    let out = flood_expect_close(&s, vec![b'a'; 1024 * 1024]);
    assert_eq!(out, b"-ERR Protocol error: too big inline request\r\n");
    let mut count = b"*".to_vec();
    count.resize(200 * 1024, b'1');
    let out = flood_expect_close(&s, count);
    assert_eq!(out, b"-ERR Protocol error: too big mbulk count string\r\n");
    let mut len = b"*1\r\n$".to_vec();
    len.resize(200 * 1024, b'1');
    let out = flood_expect_close(&s, len);
    assert_eq!(out, b"-ERR Protocol error: too big bulk count string\r\n");
    assert_alive(&s);
}

#[test]
fn garbage_and_truncated_frames() {
    let s = TestServer::start();
    // Binary garbage on an inline line: a NUL ends the line's content (as in Redis), so this
    // one is an empty request; the connection keeps working.
    let mut c = Raw::new(&s);
    c.send(b"\x00\x01\xfe\xff garbage\r\nPING\r\n");
    assert_eq!(c.read(), V::Simple("PONG".into()));
    // Without a NUL it is an unknown command, and the connection keeps working too.
    c.send(b"\xff\xfe\x01 x\r\nPING\r\n");
    match c.read() {
        V::Error(e) => assert!(e.starts_with("ERR unknown command"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(c.read(), V::Simple("PONG".into()));

    // Pseudo-random bytes: whatever the server makes of them, it survives.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let noise: Vec<u8> = (0..64 * 1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    let mut c = s.raw();
    c.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let _ = c.write_all(&noise);
    let _ = read_raw(&mut c, usize::MAX);
    drop(c);
    assert_alive(&s);

    // A truncated frame followed by EOF: nothing runs, nothing is answered, the server closes.
    let out = {
        let mut c = s.raw();
        c.write_all(b"*3\r\n$3\r\nSET\r\n$5\r\ntrunc\r\n$5\r\nva")
            .unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        let (out, closed) = read_raw(&mut c, usize::MAX);
        assert!(closed);
        out
    };
    assert_eq!(out, b"");
    let mut c = Raw::new(&s);
    assert_eq!(c.cmd(&[b"GET", b"trunc"]), V::Nil);
    // A frame split across writes completes when the rest arrives.
    let full = resp(&[b"SET", b"split", b"value"]);
    for cut in [1, 5, 13, full.len() - 1] {
        c.send(&full[..cut]);
        std::thread::sleep(Duration::from_millis(20));
        c.send(&full[cut..]);
        assert_eq!(c.read(), V::ok());
    }
    assert_eq!(c.cmd(&[b"GET", b"split"]), V::bulk("value"));
    assert_alive(&s);
}

#[test]
fn slow_client_does_not_block_others() {
    let s = TestServer::start();
    let mut fast = Raw::new(&s);
    assert_eq!(fast.cmd(&[b"SET", b"slow", b"value"]), V::ok());
    let mut slow = s.raw();
    let request = resp(&[b"GET", b"slow"]);
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let mut w = slow.try_clone().unwrap();
        let done = done.clone();
        std::thread::spawn(move || {
            // One byte at a time over ~3 s.
            for b in request {
                w.write_all(&[b]).unwrap();
                std::thread::sleep(Duration::from_millis(120));
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    let mut served = 0;
    while !done.load(Ordering::SeqCst) {
        let key = format!("fast{served}");
        assert_eq!(fast.cmd(&[b"SET", key.as_bytes(), b"x"]), V::ok());
        assert_eq!(fast.cmd(&[b"GET", key.as_bytes()]), V::bulk("x"));
        served += 1;
        std::thread::sleep(Duration::from_millis(10));
    }
    writer.join().unwrap();
    assert!(served > 0);
    let (out, _) = read_raw(&mut slow, 11);
    assert_eq!(out, b"$5\r\nvalue\r\n");
}

#[test]
fn client_killed_while_its_commands_run() {
    let s = TestServer::start();
    let mut victim = Raw::new(&s);
    let id = match victim.cmd(&[b"CLIENT", b"ID"]) {
        V::Int(id) => id,
        other => panic!("CLIENT ID replied {other:?}"),
    };
    // A long pipeline keeps the victim's runs in the pool while it is killed.
    let mut buf = Vec::new();
    for i in 0..50_000 {
        buf.extend(resp(&[b"SET", format!("kill{i}").as_bytes(), b"x"]));
    }
    let mut w = victim.w.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = w.write_all(&buf); // fails once the server closes: expected
    });
    std::thread::sleep(Duration::from_millis(20));
    let mut killer = Raw::new(&s);
    assert_eq!(
        killer.cmd(&[b"CLIENT", b"KILL", b"ID", id.to_string().as_bytes()]),
        V::Int(1)
    );
    // The victim's replies are whole +OKs up to the close.
    let got = victim.read_to_eof();
    assert!(got.len() < 50_000 * 5, "the victim was not closed");
    assert!(got.chunks(5).take(got.len() / 5).all(|r| r == b"+OK\r\n"));
    writer.join().unwrap();
    assert_eq!(killer.cmd(&[b"PING"]), V::Simple("PONG".into()));
    assert_alive(&s);
}

#[test]
fn client_that_never_reads_is_throttled() {
    let s = TestServer::start();
    let mut other = Raw::new(&s);
    let value = vec![b'v'; 512 * 1024];
    assert_eq!(other.cmd(&[b"SET", b"big", &value]), V::ok());
    let baseline = s.rss_kib();

    // A stream of GET big and SET big, repeated forever, never reading a reply. Over a
    // thousand GETs arrive in one read of the socket: unless a job stops once its replies are
    // big, one run of them alone holds 500 MB of replies.
    let mut chunk = Vec::new();
    for _ in 0..2000 {
        chunk.extend(resp(&[b"GET", b"big"]));
    }
    chunk.extend(resp(&[b"SET", b"big2", &value]));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let w = s.raw();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut w = w;
            w.set_write_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            let mut pos = 0;
            let mut written = 0usize;
            while !stop.load(Ordering::SeqCst) {
                // `write`, not `write_all`: a timed-out write must not leave half a command.
                match w.write(&chunk[pos..]) {
                    Ok(n) => {
                        written += n;
                        pos = (pos + n) % chunk.len();
                    }
                    Err(e)
                        if e.kind() == std::io::ErrorKind::WouldBlock
                            || e.kind() == std::io::ErrorKind::TimedOut => {}
                    Err(e) => panic!("the server closed a client that was only slow: {e}"),
                }
            }
            (w, written)
        })
    };
    let start = Instant::now();
    let mut peak = baseline;
    let mut pings = 0;
    while start.elapsed() < Duration::from_secs(6) {
        assert_eq!(other.cmd(&[b"PING"]), V::Simple("PONG".into()));
        pings += 1;
        peak = peak.max(s.rss_kib());
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::SeqCst);
    let (w, written) = writer.join().unwrap();
    assert!(pings > 0 && written > 0);
    assert!(
        peak < baseline + 300 * 1024,
        "RSS grew from {baseline} KiB to {peak} KiB"
    );
    drop(w);
    assert_alive(&s);
}

#[test]
fn maxclients_refuses_extra_connections() {
    let s = TestServer::start_with(&["--maxclients", "2"]);
    let mut a = Raw::new(&s);
    let mut b = Raw::new(&s);
    assert_eq!(a.cmd(&[b"PING"]), V::Simple("PONG".into()));
    assert_eq!(b.cmd(&[b"PING"]), V::Simple("PONG".into()));
    let mut third = s.raw();
    let (out, closed) = read_raw(&mut third, usize::MAX);
    assert_eq!(out, b"-ERR max number of clients reached\r\n");
    assert!(closed);
    assert_eq!(a.cmd(&[b"PING"]), V::Simple("PONG".into()));
    // Once a client leaves there is room again (the close is seen asynchronously: poll).
    drop(b);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut c = s.raw();
        let (out, _) = roundtrip_raw(&mut c, b"PING\r\n", 7);
        if out == b"+PONG\r\n" {
            break;
        }
        assert_eq!(out, b"-ERR max number of clients reached\r\n");
        assert!(Instant::now() < deadline, "no room after a client left");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn idle_clients_time_out() {
    let s = TestServer::start_with(&["--timeout", "1"]);
    let mut idle = Raw::new(&s);
    assert_eq!(idle.cmd(&[b"PING"]), V::Simple("PONG".into()));
    let mut busy = Raw::new(&s);
    // The busy client talks every 200 ms for 2.5 s and is never cut off.
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(2500) {
        assert_eq!(busy.cmd(&[b"PING"]), V::Simple("PONG".into()));
        std::thread::sleep(Duration::from_millis(200));
    }
    // The idle one is closed (the read is bounded by the harness's timeout).
    assert_eq!(idle.read_to_eof(), b"");
    assert_eq!(busy.cmd(&[b"PING"]), V::Simple("PONG".into()));
}

#[test]
fn query_buffer_limit_closes_client() {
    let s = TestServer::start_with(&["--client-query-buffer-limit", "1mb"]);
    let mut input = b"*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$2097152\r\n".to_vec();
    input.resize(input.len() + 2 * 1024 * 1024, b'x');
    input.extend_from_slice(b"\r\n");
    // Redis closes without a reply.
    let out = flood_expect_close(&s, input);
    assert_eq!(out, b"");
    let mut c = Raw::new(&s);
    assert_eq!(c.cmd(&[b"GET", b"big"]), V::Nil);
    // Below the limit, big requests are fine.
    let half = vec![b'h'; 512 * 1024];
    assert_eq!(c.cmd(&[b"SET", b"half", &half]), V::ok());
    assert_eq!(c.cmd(&[b"GET", b"half"]), V::Bulk(half));
}

#[test]
fn output_buffer_limit_closes_client_that_does_not_read() {
    let s = TestServer::start_with(&["--client-output-buffer-limit", "normal 1mb 0 0"]);
    let mut c = Raw::new(&s);
    let value = vec![b'v'; 512 * 1024];
    assert_eq!(c.cmd(&[b"SET", b"big", &value]), V::ok());
    // Replies far beyond what the socket buffers hold, not read until the server gave up.
    let n = 400;
    let mut buf = Vec::new();
    for _ in 0..n {
        buf.extend(resp(&[b"GET", b"big"]));
    }
    c.send(&buf);
    std::thread::sleep(Duration::from_millis(500));
    let got = c.read_to_eof();
    assert!(
        got.len() < n * value.len(),
        "all {} bytes of replies were delivered",
        got.len()
    );
    // A client that reads keeps being served, even with big replies.
    let mut d = Raw::new(&s);
    for _ in 0..20 {
        assert_eq!(d.cmd(&[b"GET", b"big"]), V::Bulk(value.clone()));
    }
}

#[test]
fn redis_cli_works() {
    let s = TestServer::start();
    let cli = |args: &[&str]| crate::common::redis_cli(s.port, args);
    assert_eq!(cli(&["PING"]), "PONG\n");
    assert_eq!(cli(&["SET", "greeting", "hello world"]), "OK\n");
    assert_eq!(cli(&["GET", "greeting"]), "hello world\n");
    assert_eq!(cli(&["-n", "3", "SET", "k", "three"]), "OK\n");
    assert_eq!(cli(&["-n", "3", "GET", "k"]), "three\n");

    // --pipe mode: 1000 SETs in RESP form.
    let mut input = Vec::new();
    for i in 0..1000 {
        input.extend(resp(&[
            b"SET",
            format!("pipe{i}").as_bytes(),
            format!("{i}").as_bytes(),
        ]));
    }
    let mut child = Command::new("redis-cli")
        .args(["-p", &s.port.to_string(), "--pipe", "--pipe-timeout", "20"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("redis-cli");
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = wait_output(child, Duration::from_secs(60));
    assert!(
        out.contains("errors: 0, replies: 1000"),
        "redis-cli --pipe said: {out}"
    );
    assert_eq!(cli(&["GET", "pipe999"]), "999\n");
}

/// Waits (bounded) for a child and returns its stdout and stderr.
fn wait_output(mut child: std::process::Child, limit: Duration) -> String {
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("child process did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "exit status {}", out.status);
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    text
}

#[test]
fn redis_benchmark_smoke() {
    let s = TestServer::start();
    let child = Command::new("redis-benchmark")
        .args([
            "-p",
            &s.port.to_string(),
            "-t",
            "set,get",
            "-n",
            "2000",
            "-c",
            "5",
            "-q",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("redis-benchmark");
    // Output is small, so pipes cannot fill before the exit.
    let out = wait_output(child, Duration::from_secs(120));
    assert!(out.contains("SET: "), "{out}");
    assert!(out.contains("GET: "), "{out}");
}
