//! The test harness: start, stop, kill and restart a real kvik-server process.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a server may take to start (RocksDB open) before the test fails.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Read/write timeout of every client the harness hands out: a hung server fails the test.
pub const IO_TIMEOUT: Duration = Duration::from_secs(20);

pub struct TestServer {
    child: Option<Child>,
    pub port: u16,
    pub dir: PathBuf,
    /// Keeps the temporary directory alive (None when the caller owns `dir`).
    _tmp: Option<tempfile::TempDir>,
    extra_args: Vec<String>,
}

impl TestServer {
    /// A server on a fresh data directory with default settings.
    pub fn start() -> TestServer {
        TestServer::start_with(&[])
    }

    /// A server on a fresh data directory with extra `--name value` arguments.
    pub fn start_with(args: &[&str]) -> TestServer {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path().join("data");
        let mut s = TestServer::start_in(&dir, args);
        s._tmp = Some(tmp);
        s
    }

    /// A server on `dir` (which may hold data from an earlier server).
    pub fn start_in(dir: &Path, args: &[&str]) -> TestServer {
        let extra_args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let (child, port) = spawn(dir, &extra_args);
        TestServer {
            child: Some(child),
            port,
            dir: dir.to_path_buf(),
            _tmp: None,
            extra_args,
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A `redis` crate connection with timeouts.
    pub fn client(&self) -> redis::Connection {
        let client = redis::Client::open(self.url()).expect("client");
        let con = client
            .get_connection_with_timeout(IO_TIMEOUT)
            .expect("connect to kvik-server");
        con.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        con.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        con
    }

    /// A raw TCP connection with timeouts, for byte-level protocol tests.
    pub fn raw(&self) -> TcpStream {
        let s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        s
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Sends SIGKILL and waits for the process to go.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends SIGTERM and waits (bounded) for the exit status.
    pub fn terminate(&mut self) -> ExitStatus {
        let mut c = self.child.take().expect("running");
        unsafe_free_sigterm(c.id());
        wait_bounded(&mut c, Duration::from_secs(30))
    }

    /// Waits (bounded) for the process to exit on its own, e.g. after SHUTDOWN.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let mut c = self.child.take().expect("running");
        wait_bounded(&mut c, Duration::from_secs(30))
    }

    /// Starts a new server process on the same data directory and settings.
    pub fn restart(&mut self) {
        if self.child.is_some() {
            self.terminate();
        }
        let (child, port) = spawn(&self.dir, &self.extra_args);
        self.child = Some(child);
        self.port = port;
    }

    /// Resident memory of the server process in KiB (from /proc).
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// True while the process is running.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => c.try_wait().map(|s| s.is_none()).unwrap_or(false),
            None => false,
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn unsafe_free_sigterm(pid: u32) {
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
}

fn wait_bounded(c: &mut Child, limit: Duration) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = c.try_wait().expect("wait") {
            return status;
        }
        if start.elapsed() > limit {
            let _ = c.kill();
            panic!("kvik-server did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts the binary with `--port 0` and reads its log until it reports the bound port.
fn spawn(dir: &Path, extra: &[String]) -> (Child, u16) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kvik-server"))
        .arg("--port")
        .arg("0")
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn kvik-server");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let mut sent = false;
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if std::env::var_os("KVIK_TEST_LOG").is_some() {
                eprint!("[kvik] {line}");
            }
            if !sent {
                if let Some(rest) = line.split("ready to accept connections on port ").nth(1) {
                    let port: u16 = rest
                        .split_whitespace()
                        .next()
                        .and_then(|p| p.parse().ok())
                        .expect("port in ready line");
                    let _ = tx.send(port);
                    sent = true;
                }
            }
        }
    });
    match rx.recv_timeout(START_TIMEOUT) {
        Ok(port) => (child, port),
        Err(_) => {
            let _ = child.kill();
            panic!("kvik-server did not report ready within {START_TIMEOUT:?}");
        }
    }
}

/// Sends raw bytes and reads whatever the server answers until `expect_len` bytes arrived, the
/// connection closed, or the read timed out. Returns (bytes, closed_by_server).
pub fn roundtrip_raw(s: &mut TcpStream, send: &[u8], expect_len: usize) -> (Vec<u8>, bool) {
    s.write_all(send).unwrap();
    read_raw(s, expect_len)
}

/// Reads until `expect_len` bytes, EOF (returns closed = true) or timeout.
pub fn read_raw(s: &mut TcpStream, expect_len: usize) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    while out.len() < expect_len {
        match s.read(&mut buf) {
            Ok(0) => return (out, true),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                return (out, false)
            }
            Err(_) => return (out, true),
        }
    }
    (out, false)
}

/// Runs redis-cli against the server with `args`; returns stdout. Panics if redis-cli is missing.
pub fn redis_cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .arg("-p")
        .arg(port.to_string())
        .args(args)
        .output()
        .expect("redis-cli (Debian's redis-tools) must be installed: make test installs it");
    String::from_utf8_lossy(&out.stdout).into_owned()
}
