//! A real etcd (Debian's `etcd-server`, installed by `make deps`) for tests: one member, or a
//! cluster of several, on loopback, client and peer URLs on free ports, data in a temporary
//! directory per member, started within [`crate::START_TIMEOUT`] and killed on drop. No etcd
//! installed fails the test with the fix, never skips it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running single-member etcd; SIGKILLed on drop.
pub struct EtcdServer {
    child: Option<Child>,
    /// The client port (plain HTTP, gRPC and the JSON gateway).
    pub client_port: u16,
    peer_port: u16,
    name: String,
    /// `--initial-cluster`: every member's name=peer URL.
    initial_cluster: String,
    dir: tempfile::TempDir,
    log: PathBuf,
}

/// The etcd binary: `$KVIK_ETCD_BIN`, else `etcd` on PATH.
fn etcd_bin() -> String {
    std::env::var("KVIK_ETCD_BIN").unwrap_or_else(|_| "etcd".to_string())
}

impl EtcdServer {
    /// Starts a one-member etcd and waits (bounded) until its gateway answers a range request.
    pub fn start() -> EtcdServer {
        EtcdServer::start_cluster(1).pop().expect("one member")
    }

    /// Starts an etcd cluster of `n` members and waits (bounded) until each answers. The free
    /// ports are free when picked, not when etcd binds them (tests run in parallel): a member
    /// that finds its port taken makes the whole cluster start again on new ports (3 tries).
    pub fn start_cluster(n: usize) -> Vec<EtcdServer> {
        let mut tries = 0;
        loop {
            tries += 1;
            match EtcdServer::try_start_cluster(n) {
                Ok(members) => return members,
                Err(why) if tries < 3 => eprintln!("etcd: {why}; starting again on new ports"),
                Err(why) => panic!("etcd: {why}"),
            }
        }
    }

    fn try_start_cluster(n: usize) -> Result<Vec<EtcdServer>, String> {
        let mut picked = std::collections::HashSet::new();
        let mut free = || loop {
            let p = crate::free_port();
            if picked.insert(p) {
                return p;
            }
        };
        let ports: Vec<(u16, u16)> = (0..n).map(|_| (free(), free())).collect();
        let initial_cluster = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer))| format!("m{i}=http://127.0.0.1:{peer}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut members: Vec<EtcdServer> = ports
            .iter()
            .enumerate()
            .map(|(i, &(client_port, peer_port))| {
                let dir = tempfile::tempdir().expect("temp dir");
                let mut m = EtcdServer {
                    child: None,
                    client_port,
                    peer_port,
                    name: format!("m{i}"),
                    initial_cluster: initial_cluster.clone(),
                    log: dir.path().join("etcd.log"),
                    dir,
                };
                m.spawn_process();
                m
            })
            .collect();
        // A member answers once a quorum is up, so all are started before any is waited for.
        wait_ready(&mut members)?;
        Ok(members)
    }

    fn spawn(&mut self) {
        self.spawn_process();
        if let Err(why) = wait_ready(std::slice::from_mut(self)) {
            panic!("etcd: {why}");
        }
    }

    fn spawn_process(&mut self) {
        let client = format!("http://127.0.0.1:{}", self.client_port);
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("etcd log file");
        let child = Command::new(etcd_bin())
            .arg("--name")
            .arg(&self.name)
            .arg("--data-dir")
            .arg(self.dir.path().join("data"))
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &self.initial_cluster])
            .args(["--initial-cluster-token", "kvik-test"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start etcd ({e}): install Debian's etcd-server with `make deps` \
                     (or point KVIK_ETCD_BIN at an etcd binary)"
                )
            });
        self.child = Some(child);
    }

    /// `Err` if etcd exited because its port was taken; panics (with its log) if it exited
    /// for another reason.
    fn check_running(&mut self) -> Result<(), String> {
        let Some(status) = self
            .child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
        else {
            return Ok(());
        };
        let log = self.log_text();
        if log.contains("address already in use") {
            return Err(format!(
                "member {} found its port taken ({status})",
                self.name
            ));
        }
        panic!("etcd exited at start ({status}); its log:\n{log}");
    }

    /// True when the JSON gateway answers a range request with HTTP 200.
    fn answers(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.client_port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        let body = r#"{"key":"AA=="}"#;
        let req = format!(
            "POST /v3/kv/range HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        );
        if s.write_all(req.as_bytes()).is_err() {
            return false;
        }
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out.starts_with("HTTP/1.1 200")
    }

    /// `127.0.0.1:<client port>`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    /// SIGKILLs etcd (its data stays for [`EtcdServer::restart`]).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts etcd again on the same ports and data.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// What etcd logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Waits (bounded) until every member answers. A member that died leaves the others without a
/// quorum, so every member's exit is watched while any is waited for.
fn wait_ready(members: &mut [EtcdServer]) -> Result<(), String> {
    let start = Instant::now();
    loop {
        for m in members.iter_mut() {
            m.check_running()?;
        }
        if members.iter().all(EtcdServer::answers) {
            return Ok(());
        }
        if start.elapsed() > crate::START_TIMEOUT {
            let logs: Vec<String> = members.iter().map(EtcdServer::log_text).collect();
            members.iter_mut().for_each(EtcdServer::kill);
            panic!(
                "etcd did not answer within {:?}; its log:\n{}",
                crate::START_TIMEOUT,
                logs.join("\n---\n")
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.kill();
    }
}
