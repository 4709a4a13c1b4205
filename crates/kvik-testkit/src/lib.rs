//! kvik-testkit: the process harness shared by the workspace's integration tests (a dev-dependency
//! only; never published).
//!
//! It owns what every test binary needs to drive real servers over real sockets:
//! - [`Endpoint`]: address, URL, `redis` crate connection and raw TCP stream of either server.
//! - [`KvikServer`]: a kvik-server process started with `--port 0 --dir <dir>` on a fresh temporary
//!   directory or a given one. The port is read from the "ready to accept connections on port N"
//!   line of its stdout. It hands out `redis` crate connections and raw TCP streams with
//!   timeouts, and can be killed (SIGKILL), terminated (SIGTERM), waited for, restarted on the
//!   same directory and measured (RSS).
//! - [`RedisServer`]: Debian's redis-server on a free loopback port with persistence off, for
//!   tests that compare kvik with Redis or need a Redis cluster.
//! - [`python`], [`run_python`] and [`python_stdout`]: the test virtualenv's interpreter (redis-py), made by `make deps`.
//! - [`free_port`], [`read_raw`], [`roundtrip_raw`], [`redis_cli`] and [`eventually`].
//! - [`EtcdServer`]: a real etcd (Debian's etcd-server) on loopback, for kvik-controller's tests.
//! - Clusters: [`start_redis_cluster`] (3 redis-server nodes) and [`start_kvik_cluster`] (N kvik
//!   nodes with an even-split topology pushed by `CLUSTER SETTOPOLOGY`).
//!
//! The kvik-server binary is a parameter: kvik-server's own tests pass
//! `env!("CARGO_BIN_EXE_kvik-server")`; other crates find it in the target directory.
//!
//! Every wait is bounded (start, exit, PING, reads): a hung server fails the test instead of
//! hanging it. Both handles kill their process on drop.

mod etcd;
mod python;
pub use etcd::EtcdServer;
pub use python::{python, python_stdout, run_python, SKIP_PYTHON_ENV};

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a server may take to start (RocksDB open, redis-server PING) before the test fails.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a server may take to exit after SIGTERM or SHUTDOWN before the test fails.
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(30);
/// Read/write timeout of every client the harness hands out: a hung server fails the test.
pub const IO_TIMEOUT: Duration = Duration::from_secs(20);

/// A free TCP port on 127.0.0.1 (bound and released at once; the caller binds it next).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind 127.0.0.1:0")
        .local_addr()
        .expect("local_addr")
        .port()
}

/// A `redis` crate connection to `127.0.0.1:port` with read/write/connect timeouts.
pub fn connect(port: u16) -> redis::Connection {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("client");
    let con = client
        .get_connection_with_timeout(IO_TIMEOUT)
        .unwrap_or_else(|e| panic!("connect to 127.0.0.1:{port}: {e}"));
    con.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    con.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    con
}

/// A raw TCP connection to `127.0.0.1:port` with read/write timeouts.
pub fn connect_raw(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port))
        .unwrap_or_else(|e| panic!("connect to 127.0.0.1:{port}: {e}"));
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    s
}

/// How tests reach a server on 127.0.0.1: implemented by [`KvikServer`] and [`RedisServer`], so
/// a test can run the same steps against either.
pub trait Endpoint {
    /// The loopback port the server listens on.
    fn port(&self) -> u16;

    /// `127.0.0.1:port`.
    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port())
    }

    /// `redis://127.0.0.1:port/`.
    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port())
    }

    /// A `redis` crate connection with timeouts.
    fn client(&self) -> redis::Connection {
        connect(self.port())
    }

    /// A raw TCP connection with timeouts, for byte-level protocol tests.
    fn raw(&self) -> TcpStream {
        connect_raw(self.port())
    }
}

/// A running kvik-server process; killed (SIGKILL) on drop.
pub struct KvikServer {
    bin: PathBuf,
    child: Option<Child>,
    pub port: u16,
    pub dir: PathBuf,
    /// Keeps the temporary directory alive (None when the caller owns `dir`).
    _tmp: Option<tempfile::TempDir>,
    extra_args: Vec<String>,
}

impl KvikServer {
    /// Starts `bin` on a fresh temporary data directory with extra `--name value` arguments.
    pub fn start(bin: impl AsRef<Path>, args: &[&str]) -> KvikServer {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = tmp.path().join("data");
        let mut s = KvikServer::start_in(bin, &dir, args);
        s._tmp = Some(tmp);
        s
    }

    /// Starts `bin` on `dir` (which may hold data from an earlier server).
    pub fn start_in(bin: impl AsRef<Path>, dir: &Path, args: &[&str]) -> KvikServer {
        let bin = bin.as_ref().to_path_buf();
        let extra_args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let (child, port) = spawn_kvik(&bin, dir, &extra_args);
        KvikServer {
            bin,
            child: Some(child),
            port,
            dir: dir.to_path_buf(),
            _tmp: None,
            extra_args,
        }
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
        send_sigterm(c.id());
        wait_bounded(&mut c, EXIT_TIMEOUT, "kvik-server")
    }

    /// Waits (bounded) for the process to exit on its own, e.g. after SHUTDOWN.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let mut c = self.child.take().expect("running");
        wait_bounded(&mut c, EXIT_TIMEOUT, "kvik-server")
    }

    /// Starts a new server process on the same data directory and settings (terminating the
    /// running one first, if any). The port changes.
    pub fn restart(&mut self) {
        if self.child.is_some() {
            self.terminate();
        }
        let (child, port) = spawn_kvik(&self.bin, &self.dir, &self.extra_args);
        self.child = Some(child);
        self.port = port;
    }

    /// Like [`KvikServer::restart`], but the new process listens on the same port again (a
    /// cluster node must: the pushed topology names its address).
    pub fn restart_same_port(&mut self) {
        if self.child.is_some() {
            self.terminate();
        }
        let mut args = Vec::new();
        let mut it = self.extra_args.iter();
        while let Some(a) = it.next() {
            if a == "--port" {
                it.next();
            } else {
                args.push(a.clone());
            }
        }
        args.extend(["--port".to_string(), self.port.to_string()]);
        let (child, port) = spawn_kvik(&self.bin, &self.dir, &args);
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

impl Endpoint for KvikServer {
    fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for KvikServer {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn send_sigterm(pid: u32) {
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
}

/// Waits for `c` to exit; past `limit` kills it and fails the test, naming `what`.
fn wait_bounded(c: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = c.try_wait().expect("wait") {
            return status;
        }
        if start.elapsed() > limit {
            let _ = c.kill();
            let _ = c.wait();
            panic!("{what} did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts kvik-server with `--port 0` and reads its log until it reports the bound port. The
/// reader thread keeps draining stdout (echoed to stderr when KVIK_TEST_LOG is set) so the
/// server never blocks on a full pipe.
fn spawn_kvik(bin: &Path, dir: &Path, extra: &[String]) -> (Child, u16) {
    let mut cmd = Command::new(bin);
    // `--port 0` (a free port, read back from the log) unless the caller fixes the port.
    if !extra.iter().any(|a| a == "--port") {
        cmd.arg("--port").arg("0");
    }
    let mut child = cmd
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
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
            let _ = child.wait();
            panic!("kvik-server did not report ready within {START_TIMEOUT:?}");
        }
    }
}

/// A running redis-server (Debian's) on a free loopback port with persistence off
/// (`--save '' --appendonly no`) and its own temporary directory; killed on drop.
pub struct RedisServer {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl RedisServer {
    /// Starts redis-server with extra `--name value` arguments and waits (bounded) until it
    /// answers PING (authenticating first when `extra` holds `--requirepass`).
    pub fn start(extra: &[&str]) -> RedisServer {
        RedisServer::start_from(None, extra)
    }

    /// Like [`RedisServer::start`], reading the config file `config` first (as
    /// `redis-server <config> --name value ...`).
    pub fn start_with_config(config: &Path, extra: &[&str]) -> RedisServer {
        RedisServer::start_from(Some(config), extra)
    }

    fn start_from(config: Option<&Path>, extra: &[&str]) -> RedisServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let child = Command::new("redis-server")
            .args(config)
            .args(["--port", &port.to_string()])
            .args(["--save", "", "--appendonly", "no"])
            .args(["--bind", "127.0.0.1"])
            .arg("--dir")
            .arg(dir.path())
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (Debian's redis-server)");
        let s = RedisServer {
            child,
            port,
            _dir: dir,
        };
        wait_ping(port, extra);
        s
    }

    /// Sends SIGKILL and waits for the process to go.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Endpoint for RedisServer {
    fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Polls a fresh connection with (AUTH and) PING until +PONG comes back, for at most
/// START_TIMEOUT.
fn wait_ping(port: u16, extra: &[&str]) {
    let pass = extra
        .windows(2)
        .find(|w| w[0] == "--requirepass")
        .map(|w| w[1]);
    let mut req = Vec::new();
    if let Some(p) = pass {
        req.extend(resp_request(&[b"AUTH", p.as_bytes()]));
    }
    req.extend(resp_request(&[b"PING"]));
    let start = Instant::now();
    loop {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            if s.write_all(&req).is_ok() {
                let mut buf = [0u8; 64];
                let mut got = Vec::new();
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    got.extend_from_slice(&buf[..n]);
                    if got.windows(5).any(|w| w == b"+PONG") {
                        return;
                    }
                }
            }
        }
        assert!(
            start.elapsed() < START_TIMEOUT,
            "redis-server on {port} never answered PING"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Encodes a command as a RESP multibulk request.
pub fn resp_request(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
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

/// Runs redis-cli against `127.0.0.1:port` with `args` and returns its stdout; fails the test if
/// redis-cli is missing or runs longer than IO_TIMEOUT.
pub fn redis_cli(port: u16, args: &[&str]) -> String {
    let mut child = Command::new("redis-cli")
        .arg("-p")
        .arg(port.to_string())
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("redis-cli (Debian's redis-tools) must be installed: make test installs it");
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = stdout.read_to_end(&mut out);
        out
    });
    wait_bounded(&mut child, IO_TIMEOUT, "redis-cli");
    String::from_utf8_lossy(&reader.join().unwrap()).into_owned()
}

/// Polls `f` every 10 ms until it returns true or `limit` passes; returns whether it held.
pub fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if f() {
            return true;
        }
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The kvik-server binary for tests of crates other than kvik-server (which use
/// `env!("CARGO_BIN_EXE_kvik-server")`): it sits next to the test executable's directory,
/// `<target>/release/kvik-server`. Fails the test with instructions when it is missing.
pub fn kvik_server_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let bin = exe
        .parent()
        .and_then(|p| p.parent())
        .map(|p| p.join("kvik-server"))
        .expect("target dir");
    assert!(
        bin.exists(),
        "kvik-server binary not found at {}: build it first with \
         `cargo build --release -p kvik-server` (same CARGO_TARGET_DIR), or run \
         `cargo test --release --workspace` / `make test`",
        bin.display()
    );
    bin
}

/// A 3-node redis-server cluster (no replicas) created with `redis-cli --cluster create`, waited
/// for (bounded) until every node reports `cluster_state:ok`. Dropping the nodes stops it.
pub fn start_redis_cluster() -> Vec<RedisServer> {
    let nodes: Vec<RedisServer> = (0..3)
        .map(|_| {
            RedisServer::start(&["--cluster-enabled", "yes", "--cluster-node-timeout", "5000"])
        })
        .collect();
    let mut args: Vec<String> = vec!["--cluster".into(), "create".into()];
    args.extend(nodes.iter().map(RedisServer::addr));
    args.extend(["--cluster-replicas", "0", "--cluster-yes"].map(String::from));
    let out = Command::new("timeout")
        .arg("60")
        .arg("redis-cli")
        .args(&args)
        .output()
        .expect("redis-cli (Debian's redis-tools) must be installed");
    assert!(
        out.status.success(),
        "redis-cli --cluster create failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let start = Instant::now();
    for n in &nodes {
        while !redis_cli(n.port, &["cluster", "info"]).contains("cluster_state:ok") {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the redis cluster never reached cluster_state:ok"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    nodes
}

/// The node id of a kvik cluster node (`CLUSTER MYID`).
pub fn kvik_node_id(port: u16) -> String {
    redis::cmd("CLUSTER")
        .arg("MYID")
        .query(&mut connect(port))
        .unwrap_or_else(|e| panic!("CLUSTER MYID on {port}: {e}"))
}

/// One topology node line per node, `<id> 127.0.0.1 <port> <first>-<last>`, with the slots split
/// evenly in node order as `redis-cli --cluster create` splits them (3 nodes: 0-5460,
/// 5461-10922, 10923-16383).
pub fn kvik_even_topology(nodes: &[KvikServer]) -> Vec<String> {
    kvik_resp::topology::even_split(nodes.len())
        .into_iter()
        .zip(nodes)
        .map(|((a, b), n)| format!("{} 127.0.0.1 {} {a}-{b}", kvik_node_id(n.port), n.port))
        .collect()
}

/// Pushes a topology to every port with `CLUSTER SETTOPOLOGY <version> <line> ...` and fails the
/// test unless each node answers +OK.
pub fn push_kvik_topology(ports: &[u16], version: u64, lines: &[String]) {
    for &port in ports {
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("SETTOPOLOGY").arg(version).arg(lines);
        let r: redis::RedisResult<String> = cmd.query(&mut connect(port));
        match r {
            Ok(ok) if ok == "OK" => {}
            other => panic!("CLUSTER SETTOPOLOGY {version} on {port}: {other:?}"),
        }
    }
}

/// A kvik cluster of `n` nodes on loopback: each node started from `bin` with
/// `--cluster-enabled yes` and `extra_args` on its own temporary directory and free port, then
/// topology version 1 pushed to all of them, the 16384 slots split evenly in node order (see
/// [`kvik_even_topology`]). There is no gossip, so the cluster is usable as soon as this returns.
/// Read the topology back with `CLUSTER TOPOLOGY`; push a newer one with
/// [`push_kvik_topology`]. Dropping the nodes stops them.
pub fn start_kvik_cluster(bin: impl AsRef<Path>, n: usize, extra_args: &[&str]) -> Vec<KvikServer> {
    let mut args = vec!["--cluster-enabled", "yes"];
    args.extend_from_slice(extra_args);
    let nodes: Vec<KvikServer> = (0..n)
        .map(|_| KvikServer::start(bin.as_ref(), &args))
        .collect();
    let lines = kvik_even_topology(&nodes);
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    push_kvik_topology(&ports, 1, &lines);
    nodes
}
