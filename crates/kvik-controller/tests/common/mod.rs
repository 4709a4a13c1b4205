//! What the controller's integration tests share: the kvik-controller binary as a child
//! process, `status` and `kvik-cluster` run in-process, a cluster of kvik nodes and etcd for it,
//! and writers that record which node acknowledged each key (to find split brain).

#![allow(dead_code)]

use kvik_resp::cluster::key_slot;
use kvik_testkit::{
    eventually, kvik_server_bin, start_kvik_cluster, Endpoint, EtcdServer, KvikServer,
};
use redis::Value;
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const NODE_TIMEOUT_MS: u64 = 2_000;
/// The nodes' `cluster-write-lease-ms` in these tests: shorter than the node-timeout, as the
/// README asks.
pub const LEASE_MS: u64 = 1_000;

/// The kvik-controller binary as a child process; its log lines are collected (and echoed to
/// stderr, captured by the test harness); killed on drop.
pub struct ControllerProc {
    pub child: Child,
    log: Arc<Mutex<Vec<String>>>,
}

impl ControllerProc {
    pub fn start(etcd: &str, cluster: &str, id: &str, seeds: &[String]) -> ControllerProc {
        ControllerProc::start_with(&[], &[], etcd, cluster, id, seeds)
    }

    /// Started through `prefix` (e.g. `ip netns exec NAME`) with `env` set.
    pub fn start_with(
        prefix: &[&str],
        env: &[(&str, &str)],
        etcd: &str,
        cluster: &str,
        id: &str,
        seeds: &[String],
    ) -> ControllerProc {
        let bin = env!("CARGO_BIN_EXE_kvik-controller");
        let mut cmd = match prefix {
            [] => Command::new(bin),
            [first, more @ ..] => {
                let mut c = Command::new(first);
                c.args(more).arg(bin);
                c
            }
        };
        cmd.envs(env.iter().copied())
            .args([
                "--etcd",
                etcd,
                "--cluster",
                cluster,
                "--probe-timeout-ms",
                "1000",
            ])
            .args(["run", "--id", id, "--probe-interval-ms", "200"])
            .args(["--node-timeout-ms", &NODE_TIMEOUT_MS.to_string()])
            .args(["--lease-ttl-secs", "3"]);
        for s in seeds {
            cmd.args(["--seed", s]);
        }
        let mut child = cmd
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start kvik-controller");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (stderr, sink, tag) = (child.stderr.take().unwrap(), log.clone(), id.to_string());
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[{tag}] {line}");
                sink.lock().unwrap().push(line);
            }
        });
        ControllerProc { child, log }
    }

    pub fn logged(&self, needle: &str) -> bool {
        self.log.lock().unwrap().iter().any(|l| l.contains(needle))
    }
}

impl Drop for ControllerProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `kvik-controller status` run in-process; returns (exit status, stdout + stderr).
pub fn status(etcd: &str, cluster: &str) -> (i32, String) {
    let args: Vec<String> = [
        "kvik-controller",
        "--etcd",
        etcd,
        "--cluster",
        cluster,
        "status",
    ]
    .map(String::from)
    .to_vec();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = kvik_controller::main_with(&args, &mut out, &mut err);
    out.extend_from_slice(&err);
    (code, String::from_utf8_lossy(&out).into_owned())
}

pub fn kvik_cluster(args: &[&str]) -> (i32, String) {
    let mut argv = vec!["kvik-cluster".to_string()];
    argv.extend(args.iter().map(|s| s.to_string()));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = kvik_cluster::run(&argv, &mut out, &mut err);
    out.extend_from_slice(&err);
    (code, String::from_utf8_lossy(&out).into_owned())
}

/// ROLE: ("master", 0) or ("slave", primary port) with the link state.
pub fn role(n: &KvikServer) -> (String, i64, String) {
    let v: Vec<Value> = redis::cmd("ROLE").query(&mut n.client()).unwrap();
    let text = |i: usize| -> String { redis::from_redis_value(&v[i]).unwrap() };
    match text(0).as_str() {
        "slave" => (
            "slave".into(),
            redis::from_redis_value(&v[2]).unwrap(),
            text(3),
        ),
        other => (other.into(), 0, String::new()),
    }
}

/// A hash tag whose slot primary `i` of the even 3-node split owns.
pub fn tag_of(i: usize) -> String {
    let (a, b) = kvik_resp::topology::even_split(3)[i];
    (0..)
        .map(|n| format!("t{n}"))
        .find(|t| (a..=b).contains(&key_slot(t.as_bytes())))
        .unwrap()
}

/// A cluster for the controller: etcd, 3 primaries (topology v1) and `replicas` replicas of
/// the first primary added with kvik-cluster (one version each).
pub struct Setup {
    pub etcd: EtcdServer,
    pub nodes: Vec<KvikServer>,
    pub replicas: Vec<KvikServer>,
    pub addrs: Vec<String>,
}

pub fn setup(replicas: usize) -> Setup {
    setup_with_lease(replicas, LEASE_MS)
}

/// [`setup`] with the nodes' `cluster-write-lease-ms` at `lease_ms` (0: off).
pub fn setup_with_lease(replicas: usize, lease_ms: u64) -> Setup {
    let etcd = EtcdServer::start();
    let bin = kvik_server_bin();
    let lease = lease_ms.to_string();
    let lease_args = ["--cluster-write-lease-ms", lease.as_str()];
    let nodes = start_kvik_cluster(&bin, 3, &lease_args);
    let replicas: Vec<KvikServer> = (0..replicas)
        .map(|_| {
            let mut args = vec!["--cluster-enabled", "yes"];
            args.extend(lease_args);
            KvikServer::start(&bin, &args)
        })
        .collect();
    for r in &replicas {
        let (code, out) = kvik_cluster(&["add-replica", &r.addr(), &nodes[0].addr()]);
        assert_eq!(code, 0, "{out}");
    }
    let mut addrs: Vec<String> = nodes.iter().map(|n| n.addr()).collect();
    addrs.extend(replicas.iter().map(|r| r.addr()));
    Setup {
        etcd,
        nodes,
        replicas,
        addrs,
    }
}

/// Waits until `status` says `leader` leads and etcd holds topology `version`.
pub fn wait_leading(etcd: &EtcdServer, leader: &str, version: u64) {
    let mut last = String::new();
    assert!(
        eventually(Duration::from_secs(30), || {
            last = status(&etcd.addr(), "t").1;
            last.contains(&format!("leader: {leader} "))
                && last.contains(&format!("topology version {version} "))
        }),
        "{leader} never led with topology v{version} stored: {last}"
    );
}

/// One write a node acknowledged: the key, the node, when the request was sent and when the
/// reply came back.
#[derive(Clone, Debug)]
pub struct Ack {
    pub key: String,
    pub node: String,
    pub sent: Instant,
    pub acked: Instant,
}

/// What a [`pinned_writer`] saw.
#[derive(Default)]
pub struct Seen {
    pub acks: Vec<Ack>,
    /// When each refusal came, by error code (CLUSTERDOWN, MOVED, READONLY, IO, ...).
    pub refused: BTreeMap<String, Vec<Instant>>,
}

impl Seen {
    /// How many refusals with `code` came after `t`, and the first of them.
    pub fn refused_after(&self, code: &str, t: Instant) -> (usize, Option<Instant>) {
        let after: Vec<Instant> = self.refused.get(code).map_or(Vec::new(), |v| {
            v.iter().copied().filter(|&r| r > t).collect()
        });
        (after.len(), after.first().copied())
    }
}

/// A client pinned to `addr` (as one that has not refreshed its slot map): SETs fresh keys
/// `{tag}<prefix><n>` one at a time until `stop`, recording each acknowledgement with the node
/// and counting refusals; reconnects after a connection error (a frozen node times out).
pub fn pinned_writer(
    addr: String,
    tag: String,
    prefix: &'static str,
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Seen>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let connect = || -> Option<redis::Connection> {
            let c = redis::Client::open(format!("redis://{addr}/")).ok()?;
            let con = c
                .get_connection_with_timeout(Duration::from_millis(500))
                .ok()?;
            con.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
            Some(con)
        };
        let mut con = None;
        let mut i = 0u64;
        while !stop.load(Ordering::Relaxed) {
            if con.is_none() {
                con = connect();
            }
            let Some(c) = con.as_mut() else {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            };
            let key = format!("{{{tag}}}{prefix}{i}");
            i += 1;
            let sent = Instant::now();
            let r = redis::cmd("SET").arg(&key).arg(&addr).query::<()>(c);
            let mut s = seen.lock().unwrap();
            match r {
                Ok(()) => s.acks.push(Ack {
                    key,
                    node: addr.clone(),
                    sent,
                    acked: Instant::now(),
                }),
                Err(e) => {
                    let code = e.code().unwrap_or("IO").to_string();
                    s.refused
                        .entry(code.clone())
                        .or_default()
                        .push(Instant::now());
                    drop(s);
                    if code == "IO" {
                        con = None;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        }
    })
}

/// Split brain in a record of acknowledgements of one slot: writes a node acknowledged although
/// it received them after another node had already acknowledged one, while the first node had
/// acknowledged writes before the other did (the old owner still accepting writes after the new
/// owner started to). Each proves two nodes accepted writes for the slot at once.
pub fn split_brain(acks: &[Ack]) -> Vec<Ack> {
    let mut first: HashMap<&str, Instant> = HashMap::new();
    for a in acks {
        let t = first.entry(a.node.as_str()).or_insert(a.acked);
        *t = (*t).min(a.acked);
    }
    acks.iter()
        .filter(|a| {
            first.iter().any(|(&other, &since)| {
                other != a.node && first[a.node.as_str()] < since && a.sent > since
            })
        })
        .cloned()
        .collect()
}

/// Every key of `acks` has on `node` the value its writer wrote (the address of the node that
/// acknowledged it); returns the keys that do not.
pub fn missing_on(node: &KvikServer, acks: &[Ack]) -> Vec<String> {
    let mut con = node.client();
    let mut missing = Vec::new();
    for chunk in acks.chunks(500) {
        let keys: Vec<&str> = chunk.iter().map(|a| a.key.as_str()).collect();
        let values: Vec<Option<String>> = redis::cmd("MGET").arg(&keys).query(&mut con).unwrap();
        for (a, got) in chunk.iter().zip(values) {
            if got.as_deref() != Some(a.node.as_str()) {
                missing.push(a.key.clone());
            }
        }
    }
    missing
}

/// Sends `sig` (e.g. "-STOP") to the process `pid`.
pub fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}
