//! The test harness: kvik-testkit's process handle bound to this crate's kvik-server binary, and
//! the query helpers the test modules share (typed queries, error texts, bounded polling, raw
//! request encoding, INFO parsing).

#![allow(dead_code)]

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::path::Path;

use redis::{Connection, FromRedisValue, Value};

pub use kvik_testkit::{
    eventually, read_raw, redis_cli, resp_request as resp, roundtrip_raw, Endpoint,
};

const BIN: &str = env!("CARGO_BIN_EXE_kvik-server");

/// A kvik-server process of this build (see kvik_testkit::KvikServer for its methods).
pub struct TestServer(kvik_testkit::KvikServer);

impl TestServer {
    /// A server on a fresh data directory with default settings.
    pub fn start() -> TestServer {
        TestServer::start_with(&[])
    }

    /// A server on a fresh data directory with extra `--name value` arguments.
    pub fn start_with(args: &[&str]) -> TestServer {
        TestServer(kvik_testkit::KvikServer::start(BIN, args))
    }

    /// A server on `dir` (which may hold data from an earlier server).
    pub fn start_in(dir: &Path, args: &[&str]) -> TestServer {
        TestServer(kvik_testkit::KvikServer::start_in(BIN, dir, args))
    }
}

impl Deref for TestServer {
    type Target = kvik_testkit::KvikServer;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl DerefMut for TestServer {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

/// The command `args` (name first), for a test that handles the reply or error itself.
pub fn command(args: &[&str]) -> redis::Cmd {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c
}

/// Runs `args` and converts the reply; panics (naming the command) on an error reply.
pub fn q<T: FromRedisValue>(con: &mut Connection, args: &[&str]) -> T {
    command(args)
        .query(con)
        .unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

/// Runs `args` and returns the reply as it came; panics on an error reply.
pub fn qv(con: &mut Connection, args: &[&str]) -> Value {
    q(con, args)
}

/// Runs `args`, which must fail, and returns the full error text ("ERR ...").
pub fn err(con: &mut Connection, args: &[&str]) -> String {
    match command(args).query::<Value>(con) {
        Ok(v) => panic!("{args:?} should fail, got {v:?}"),
        Err(e) => format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or("")),
    }
}

/// Encodes a command of text arguments as a RESP multibulk request.
pub fn resp_str(args: &[&str]) -> Vec<u8> {
    let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    resp(&bytes)
}

/// INFO text split into sections (header -> fields); asserts every line is a header, empty, or
/// `key:value`.
pub fn parse_info(text: &str) -> HashMap<String, HashMap<String, String>> {
    let mut out: HashMap<String, HashMap<String, String>> = HashMap::new();
    let mut current = String::new();
    assert!(text.ends_with("\r\n"), "INFO ends with CRLF");
    for line in text.split("\r\n") {
        if line.is_empty() {
            continue;
        }
        if let Some(h) = line.strip_prefix("# ") {
            current = h.to_string();
            out.entry(current.clone()).or_default();
            continue;
        }
        let (k, v) = line
            .split_once(':')
            .unwrap_or_else(|| panic!("INFO line without ':': {line:?}"));
        assert!(!k.is_empty() && !current.is_empty(), "{line:?}");
        out.get_mut(&current).unwrap().insert(k.into(), v.into());
    }
    out
}

/// `INFO section`, parsed by parse_info.
pub fn info(con: &mut Connection, section: &str) -> HashMap<String, HashMap<String, String>> {
    let text: String = redis::cmd("INFO").arg(section).query(con).unwrap();
    parse_info(&text)
}

/// The numeric value of `field` in INFO stats; panics if INFO has none.
pub fn stat(con: &mut Connection, field: &str) -> u64 {
    info_field(con, "stats", field).unwrap_or_else(|| panic!("INFO stats has no {field}"))
}

/// The bytes of a string key.
pub fn get_bytes(con: &mut Connection, key: &str) -> Vec<u8> {
    redis::cmd("GET").arg(key).query(con).unwrap()
}

/// The numeric value of `field` in an INFO section, if INFO has it.
/// Commands run to completion on an I/O thread so far (INFO stats `rtc_commands`).
pub fn rtc_commands(con: &mut Connection) -> u64 {
    info_field(con, "stats", "rtc_commands").expect("INFO has rtc_commands")
}

pub fn info_field(con: &mut Connection, section: &str, field: &str) -> Option<u64> {
    info(con, section)
        .values()
        .find_map(|fields| fields.get(field))
        .and_then(|v| v.trim().parse().ok())
}

/// The I/O thread a connection is on now (CLIENT INFO `io-thread=`).
pub fn io_thread_of(con: &mut Connection) -> String {
    let line: String = q(con, &["CLIENT", "INFO"]);
    line.split_whitespace()
        .find_map(|f| f.strip_prefix("io-thread="))
        .expect("CLIENT INFO shows io-thread=")
        .to_string()
}

/// A deterministic generator (a linear congruential one): a failing sequence replays from its
/// seed.
pub struct Lcg(pub u64);

impl Lcg {
    /// The next number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}
