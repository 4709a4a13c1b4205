//! Split brain: at no point may two nodes accept writes for the same slot. Clients pinned to
//! each node of the first shard (as clients that have not refreshed their slot map) write fresh
//! keys and record which node acknowledged each one, when it was sent and when the reply came;
//! `split_brain` then finds every write the old primary acknowledged although it received it
//! after the new primary had acknowledged one. The write lease (`cluster-write-lease-ms`, on in
//! these setups) must leave none, both when the old primary is frozen and thawed (SIGSTOP,
//! SIGCONT: a process stall, or a partition from everybody that heals) and when a real network
//! partition cuts it from the controller only. Times are printed, never asserted; every wait is
//! bounded.

mod common;

use common::*;
use kvik_testkit::{
    eventually, kvik_node_id, kvik_server_bin, push_kvik_topology, Endpoint, EtcdServer, KvikServer,
};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Key prefixes of the writers pinned to the old primary and to each replica.
const PREFIXES: [&str; 3] = ["p", "r0", "r1"];

/// Writers pinned to the old primary (first) and to each replica, on one slot.
struct Writers {
    stop: Arc<AtomicBool>,
    seen: Vec<Arc<Mutex<Seen>>>,
    threads: Vec<JoinHandle<()>>,
}

impl Writers {
    fn start(addrs: &[String], tag: &str) -> Writers {
        let stop = Arc::new(AtomicBool::new(false));
        let seen: Vec<Arc<Mutex<Seen>>> = addrs.iter().map(|_| Arc::default()).collect();
        let threads = addrs
            .iter()
            .zip(&seen)
            .zip(PREFIXES)
            .map(|((a, s), prefix)| {
                pinned_writer(a.clone(), tag.to_string(), prefix, stop.clone(), s.clone())
            })
            .collect();
        Writers {
            stop,
            seen,
            threads,
        }
    }

    fn acks_of(&self, i: usize) -> usize {
        self.seen[i].lock().unwrap().acks.len()
    }

    /// Stops the writers; returns every acknowledgement.
    fn finish(self) -> Vec<Ack> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
        self.seen
            .iter()
            .flat_map(|s| s.lock().unwrap().acks.clone())
            .collect()
    }
}

/// What one run saw, printed by [`Outcome::print`].
struct Outcome {
    acks: Vec<Ack>,
    old: String,
    new: String,
    /// When the fault began (freeze, cut) and ended (thaw, heal).
    fault_at: Instant,
    healed_at: Instant,
    /// The old primary's refusals with CLUSTERDOWN after the fault began: how many, and the
    /// first.
    fenced: (usize, Option<Instant>),
}

impl Outcome {
    fn split_brain(&self) -> Vec<Ack> {
        split_brain(&self.acks)
    }

    fn print(&self, what: &str) {
        let by = |n: &str| -> Vec<&Ack> { self.acks.iter().filter(|a| a.node == n).collect() };
        let old_before = by(&self.old)
            .iter()
            .filter(|a| a.acked < self.fault_at)
            .count();
        let old_after = by(&self.old)
            .iter()
            .filter(|a| a.acked > self.healed_at)
            .count();
        let new_first = by(&self.new).iter().map(|a| a.acked).min();
        let ms = |t: Option<Instant>| {
            t.map_or("never".to_string(), |t| {
                format!(
                    "{} ms",
                    t.saturating_duration_since(self.fault_at).as_millis()
                )
            })
        };
        println!(
            "{what}: the old primary {} acknowledged {old_before} writes before the fault and \
             {old_after} after it ended, refused {} with CLUSTERDOWN (first {} after the fault); \
             the new primary {} acknowledged {} (first {} after the fault); split-brain writes: {}",
            self.old,
            self.fenced.0,
            ms(self.fenced.1),
            self.new,
            by(&self.new).len(),
            ms(new_first),
            self.split_brain().len()
        );
    }
}

/// Freezes the first primary (SIGSTOP) while clients pinned to it and to its two replicas
/// write; once the controller promoted a replica and that replica acknowledged writes, thaws
/// the old primary (SIGCONT) and lets the writers go on until it follows the new primary.
/// With `leader_dies`, a standby controller runs too and the leader exits right after
/// committing the failover to etcd (the `exit-after-commit` failpoint): the standby pushes it.
fn freeze_and_thaw(lease_ms: u64, leader_dies: bool) -> Outcome {
    let Setup {
        etcd,
        nodes,
        replicas,
        addrs,
    } = setup_with_lease(2, lease_ms);
    let failpoint: &[(&str, &str)] = match leader_dies {
        true => &[("KVIK_CONTROLLER_FAILPOINT", "exit-after-commit")],
        false => &[],
    };
    let mut a = ControllerProc::start_with(&[], failpoint, &etcd.addr(), "t", "ctl-a", &addrs[..1]);
    wait_leading(&etcd, "ctl-a", 3);
    let standby = leader_dies.then(|| {
        let b = ControllerProc::start(&etcd.addr(), "t", "ctl-b", &addrs[..1]);
        assert!(
            eventually(Duration::from_secs(30), || b.logged("standing by")),
            "the second controller must stand by while the first leads"
        );
        b
    });
    let shard = [nodes[0].addr(), replicas[0].addr(), replicas[1].addr()];
    let w = Writers::start(&shard, &tag_of(0));
    assert!(
        eventually(Duration::from_secs(30), || w.acks_of(0) >= 100),
        "the old primary acknowledged no writes before the freeze"
    );
    signal(nodes[0].pid(), "-STOP");
    let fault_at = Instant::now();
    let mut states = StateWatch::start(nodes[0].pid());
    let mut promoted = None;
    assert!(
        eventually(Duration::from_secs(90), || {
            promoted = (0..2).find(|&i| w.acks_of(i + 1) >= 20);
            promoted.is_some()
        }),
        "no replica was promoted and accepted writes while the primary was frozen; the \
         primary's process states since the freeze: {}",
        states.finish()
    );
    drop(states);
    let new = &replicas[promoted.unwrap()];
    if let Some(b) = &standby {
        let exit = a.child.try_wait().unwrap();
        assert_eq!(
            exit.and_then(|e| e.code()),
            Some(3),
            "the leader exits at the failpoint"
        );
        assert!(b.logged("elected leader") && b.logged("pushing it"));
        assert!(
            !b.logged("FAILOVER committed"),
            "the standby decided nothing new"
        );
    }
    let healed_at = Instant::now();
    signal(nodes[0].pid(), "-CONT");
    let want = (
        "slave".to_string(),
        new.port as i64,
        "connected".to_string(),
    );
    let mut now = (String::new(), 0, String::new());
    assert!(
        eventually(Duration::from_secs(60), || {
            now = role(&nodes[0]);
            now == want
        }),
        "the thawed primary did not follow the new one: {now:?}"
    );
    // A little more writing on both sides after the old primary learnt its new role.
    std::thread::sleep(Duration::from_millis(300));
    let fenced = w.seen[0]
        .lock()
        .unwrap()
        .refused_after("CLUSTERDOWN", fault_at);
    let acks = w.finish();
    let on_new: Vec<Ack> = acks
        .iter()
        .filter(|a| a.node == new.addr())
        .cloned()
        .collect();
    let missing = missing_on(new, &on_new);
    assert!(
        missing.is_empty(),
        "{} of {} writes the new primary acknowledged are gone, e.g. {:?}",
        missing.len(),
        on_new.len(),
        &missing[..missing.len().min(5)]
    );
    Outcome {
        acks,
        old: nodes[0].addr(),
        new: new.addr(),
        fault_at,
        healed_at,
        fenced,
    }
}

#[test]
fn a_frozen_then_thawed_primary_accepts_no_write_after_its_replica_took_over() {
    let run = freeze_and_thaw(LEASE_MS, false);
    run.print(&format!("freeze/thaw, write lease {LEASE_MS} ms"));
    let bad = run.split_brain();
    assert!(
        bad.is_empty(),
        "split brain: {} writes acknowledged by the old primary after the new one had \
         acknowledged writes, e.g. {:?}",
        bad.len(),
        &bad[..bad.len().min(3)]
    );
    assert!(run.fenced.0 > 0, "the thawed primary refused nothing");
}

/// Two controllers, and the leader dies between its etcd commit and its push while the primary
/// is frozen: the standby finishes the push, and still no two nodes accept writes for the slot.
#[test]
fn a_leader_killed_mid_failover_of_a_frozen_primary_leaves_no_split_brain() {
    let run = freeze_and_thaw(LEASE_MS, true);
    run.print(&format!(
        "freeze/thaw, leader killed after its etcd write, write lease {LEASE_MS} ms"
    ));
    let bad = run.split_brain();
    assert!(
        bad.is_empty(),
        "split brain: {} writes acknowledged by the old primary after the new one had \
         acknowledged writes, e.g. {:?}",
        bad.len(),
        &bad[..bad.len().min(3)]
    );
}

/// The same run with the lease off, to show the check finds split brain when nothing prevents
/// it (the thawed primary serves its pinned client until the controller's push reaches it).
/// Ignored: it demonstrates the fault rather than testing kvik (`--ignored` to run it).
#[test]
#[ignore]
fn without_the_write_lease_a_thawed_primary_splits_the_brain() {
    let run = freeze_and_thaw(0, false);
    run.print("freeze/thaw, write lease off");
    assert!(
        !run.split_brain().is_empty(),
        "no split brain seen without the lease: the check or the scenario is too weak"
    );
}

/// The states of a process (`/proc/<pid>/stat`: T stopped, S sleeping, R running ...) as they
/// change, polled every 20 ms: when a frozen node answers anyway, the failure says whether it
/// was still stopped.
struct StateWatch {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<(Duration, char)>>>,
}

impl StateWatch {
    fn start(pid: u32) -> StateWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            let mut seen: Vec<(Duration, char)> = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                // The state follows the command name's closing parenthesis.
                let state = stat
                    .rsplit_once(") ")
                    .and_then(|(_, rest)| rest.chars().next())
                    .unwrap_or('?');
                if seen.last().map(|s| s.1) != Some(state) {
                    seen.push((start.elapsed(), state));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            seen
        });
        StateWatch {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops watching; the changes seen, as "state at +ms".
    fn finish(&mut self) -> String {
        self.stop.store(true, Ordering::Relaxed);
        let seen = self
            .thread
            .take()
            .map(|t| t.join().unwrap())
            .unwrap_or_default();
        seen.iter()
            .map(|(at, state)| format!("{state} at +{} ms", at.as_millis()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl Drop for StateWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A network namespace for the controller, joined to the host by a veth pair: the host side
/// has two addresses (`host_ip` for every node but the first primary, `cut_ip` for it alone),
/// so a blackhole route in the namespace cuts the controller from that primary only.
struct Netns {
    name: String,
    veth: String,
    host_ip: String,
    cut_ip: String,
}

/// Runs `ip` with `args`; the error names the command and what it printed.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

impl Netns {
    /// Creates it, or says loudly why it cannot (no root, no `ip`, no veth) and returns None.
    fn create() -> Option<Netns> {
        let id = std::process::id();
        let subnet = format!("10.201.{}", id % 250);
        let net = Netns {
            name: format!("kvikfence{id}"),
            veth: format!("kvf{id}h"),
            host_ip: format!("{subnet}.1"),
            cut_ip: format!("{subnet}.3"),
        };
        let peer = format!("kvf{id}n");
        let (name, veth) = (net.name.as_str(), net.veth.as_str());
        let made = [
            vec!["netns", "add", name],
            vec!["link", "add", veth, "type", "veth", "peer", "name", &peer],
            vec!["link", "set", &peer, "netns", name],
            vec!["addr", "add", &format!("{}/24", net.host_ip), "dev", veth],
            vec!["addr", "add", &format!("{}/32", net.cut_ip), "dev", veth],
            vec!["link", "set", veth, "up"],
            vec![
                "-n",
                name,
                "addr",
                "add",
                &format!("{subnet}.2/24"),
                "dev",
                &peer,
            ],
            vec!["-n", name, "link", "set", &peer, "up"],
            vec!["-n", name, "link", "set", "lo", "up"],
            vec!["-n", name, "route", "add", &net.cut_ip, "dev", &peer],
        ]
        .iter()
        .try_for_each(|a| ip(a));
        match made {
            Ok(()) => Some(net),
            Err(e) => {
                eprintln!(
                    "\n!!! SKIPPED: the network-partition test needs root with `ip netns` and \
                     veth pairs, and this machine refused: {e}\n"
                );
                println!("SKIPPED (no network namespace): {e}");
                None
            }
        }
    }

    /// Cuts (or restores) the controller's route to `cut_ip`.
    fn cut(&self, on: bool) {
        let route = match on {
            true => vec![
                "-n",
                &self.name,
                "route",
                "replace",
                "blackhole",
                &self.cut_ip,
            ],
            false => vec!["-n", &self.name, "route", "del", "blackhole", &self.cut_ip],
        };
        ip(&route).unwrap();
        if !on {
            let peer = self.veth.replace('h', "n");
            ip(&["-n", &self.name, "route", "add", &self.cut_ip, "dev", &peer]).unwrap();
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["link", "del", &self.veth]);
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// Forwards connections to `listen` (an address the namespace reaches) to `to` on the host's
/// loopback (etcd listens there only). The threads live as long as the test process.
fn forward(listen: &str, to: String) -> String {
    let l = TcpListener::bind(format!("{listen}:0")).expect("bind the etcd forwarder");
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for client in l.incoming().map_while(Result::ok) {
            let Ok(server) = TcpStream::connect(&to) else {
                continue;
            };
            let pipe = |mut a: TcpStream, mut b: TcpStream| {
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16 * 1024];
                    while let Ok(n) = a.read(&mut buf) {
                        if n == 0 || b.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = b.shutdown(std::net::Shutdown::Write);
                });
            };
            pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
            pipe(server, client);
        }
    });
    addr
}

/// A real partition: the controller runs in its own network namespace and loses its route to
/// the first primary only. That primary still reaches its replica and its clients, so only the
/// lease stops it: its replica's echoes end when the controller promotes the replica, and the
/// promoted replica holds writes until the old primary's lease has lapsed. Healed, the old
/// primary follows the new one.
#[test]
fn a_primary_cut_from_the_controller_only_stops_writing_before_its_replica_starts() {
    let Some(net) = Netns::create() else {
        return;
    };
    let etcd = EtcdServer::start();
    let etcd_in_ns = forward(&net.host_ip, etcd.addr());
    let bin = kvik_server_bin();
    let bind = format!("127.0.0.1 {} {}", net.host_ip, net.cut_ip);
    let lease = LEASE_MS.to_string();
    let args = [
        "--cluster-enabled",
        "yes",
        "--bind",
        &bind,
        // The controller's namespace reaches the nodes from a non-loopback address.
        "--protected-mode",
        "no",
        "--cluster-write-lease-ms",
        &lease,
    ];
    let nodes: Vec<KvikServer> = (0..3).map(|_| KvikServer::start(&bin, &args)).collect();
    let replica = KvikServer::start(&bin, &args);
    let host = |i: usize| if i == 0 { &net.cut_ip } else { &net.host_ip };
    let lines: Vec<String> = kvik_resp::topology::even_split(3)
        .iter()
        .zip(&nodes)
        .enumerate()
        .map(|(i, ((a, b), n))| format!("{} {} {} {a}-{b}", kvik_node_id(n.port), host(i), n.port))
        .collect();
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    push_kvik_topology(&ports, 1, &lines);
    let (code, out) = kvik_cluster(&[
        "add-replica",
        &format!("{}:{}", net.host_ip, replica.port),
        &format!("{}:{}", net.cut_ip, nodes[0].port),
    ]);
    assert_eq!(code, 0, "{out}");
    let seed = format!("{}:{}", net.host_ip, nodes[1].port);
    let _c = ControllerProc::start_with(
        &["ip", "netns", "exec", &net.name],
        &[],
        &etcd_in_ns,
        "t",
        "ctl-a",
        &[seed],
    );
    wait_leading(&etcd, "ctl-a", 2);

    let w = Writers::start(&[nodes[0].addr(), replica.addr()], &tag_of(0));
    assert!(
        eventually(Duration::from_secs(30), || w.acks_of(0) >= 100),
        "the primary acknowledged no writes before the partition"
    );
    net.cut(true);
    let fault_at = Instant::now();
    assert!(
        eventually(Duration::from_secs(90), || w.acks_of(1) >= 20),
        "the replica was not promoted or accepted no writes during the partition"
    );
    // Both sides keep writing for a while with the partition in place.
    std::thread::sleep(Duration::from_secs(2));
    let fenced = w.seen[0]
        .lock()
        .unwrap()
        .refused_after("CLUSTERDOWN", fault_at);
    net.cut(false);
    let healed_at = Instant::now();
    let want = (
        "slave".to_string(),
        replica.port as i64,
        "connected".to_string(),
    );
    let mut now = (String::new(), 0, String::new());
    assert!(
        eventually(Duration::from_secs(60), || {
            now = role(&nodes[0]);
            now == want
        }),
        "after the partition healed the old primary did not follow the new one: {now:?}"
    );
    let acks = w.finish();
    let run = Outcome {
        acks,
        old: nodes[0].addr(),
        new: replica.addr(),
        fault_at,
        healed_at,
        fenced,
    };
    run.print(&format!(
        "partition from the controller only, write lease {LEASE_MS} ms"
    ));
    let bad = run.split_brain();
    assert!(
        bad.is_empty(),
        "split brain: {} writes acknowledged by the old primary after the new one had \
         acknowledged writes, e.g. {:?}",
        bad.len(),
        &bad[..bad.len().min(3)]
    );
    assert!(
        run.fenced.0 > 0,
        "the cut primary never refused a write: it was not fenced"
    );
    let on_new: Vec<Ack> = run
        .acks
        .iter()
        .filter(|a| a.node == run.new)
        .cloned()
        .collect();
    assert_eq!(missing_on(&replica, &on_new), Vec::<String>::new());
}
