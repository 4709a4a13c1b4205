//! kvik-controller: automatic failover for a kvik cluster, with the topology kept in etcd.
//!
//! kvik nodes do not gossip and take the topology they are pushed (`CLUSTER SETTOPOLOGY`,
//! refusing one that is not newer). The controller makes etcd the one place that decides it:
//! the topology is an etcd key changed only by compare-and-swap transactions ([`record`]), one
//! controller at a time leads through an etcd lease ([`leader`]), and the leader probes every
//! node ([`health`]) and promotes the best replica of a primary that stays unreachable
//! ([`control`]). `kvik-controller status` ([`status`]) shows what etcd and the nodes say.
//!
//! ```text
//! kvik-controller run --etcd host:port --cluster NAME --seed host:port [--node-timeout-ms ..]
//! kvik-controller status --etcd host:port --cluster NAME
//! ```

pub mod control;
pub mod health;
pub mod leader;
pub mod status;

/// The etcd client and the record live in kvik-cluster, whose `--etcd` goes through the same
/// record.
pub use kvik_cluster::{etcd, record};

use clap::{Parser, Subcommand};
use kvik_cluster::Opts;
use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "kvik-controller",
    version,
    about = "Keep a kvik cluster's topology in etcd and fail over dead primaries"
)]
struct Cli {
    /// etcd client addresses (host:port, plain HTTP; several members comma-separated).
    #[arg(long, global = true, default_value = "127.0.0.1:2379")]
    etcd: String,
    /// The cluster's name (its keys are under /kvik/<cluster>/ in etcd).
    #[arg(long, global = true, default_value = "kvik")]
    cluster: String,
    /// Password of every node (AUTH).
    #[arg(short = 'a', long = "pass", global = true)]
    password: Option<String>,
    /// User name of every node, with -a.
    #[arg(long, global = true)]
    user: Option<String>,
    /// Connect/read timeout of each node probe, in milliseconds.
    #[arg(long, global = true, default_value_t = 1_000)]
    probe_timeout_ms: u64,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run the controller (campaigns for leadership; the leader probes and fails over).
    Run {
        /// This controller's id (default: host name and process id).
        #[arg(long)]
        id: Option<String>,
        /// Nodes to read the first topology from when etcd has none yet.
        #[arg(long = "seed")]
        seeds: Vec<String>,
        /// How long a primary must stay unreachable before its replica is promoted.
        #[arg(long, default_value_t = 5_000)]
        node_timeout_ms: u64,
        /// How often the leader probes every node.
        #[arg(long, default_value_t = 500)]
        probe_interval_ms: u64,
        /// The leader lease's TTL, in seconds.
        #[arg(long, default_value_t = 5)]
        lease_ttl_secs: u64,
    },
    /// Print the topology in etcd, the leader, each node's health and the last failovers.
    Status,
}

/// Runs the tool with `args` (args[0] is the program name) until it ends; returns the exit
/// status (`run` only ends on a usage error).
pub fn main_with(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let text = e.render().to_string();
            let _ = if code == 0 {
                write!(out, "{text}")
            } else {
                write!(err, "{text}")
            };
            return code;
        }
    };
    let node = Opts {
        user: cli.user.clone(),
        password: cli.password.clone(),
        timeout: Duration::from_millis(cli.probe_timeout_ms.max(1)),
        etcd: None,
    };
    let etcd_timeout = Duration::from_secs(2);
    match cli.cmd {
        Cmd::Run {
            id,
            seeds,
            node_timeout_ms,
            probe_interval_ms,
            lease_ttl_secs,
        } => {
            let id = id.unwrap_or_else(default_id);
            let cfg = control::Config {
                etcd: cli.etcd,
                cluster: cli.cluster,
                id,
                seeds,
                node_timeout: Duration::from_millis(node_timeout_ms),
                probe_interval: Duration::from_millis(probe_interval_ms.max(10)),
                lease_ttl: Duration::from_secs(lease_ttl_secs.max(2)),
                node,
                etcd_timeout,
            };
            control::run(&cfg, &AtomicBool::new(false));
            0
        }
        Cmd::Status => {
            let etcd = etcd::Etcd::new(&cli.etcd, etcd_timeout);
            match status::print(&etcd, &cli.cluster, &node, out) {
                Ok(()) => 0,
                Err(e) => {
                    let _ = writeln!(err, "[ERR] {e}");
                    1
                }
            }
        }
    }
}

/// host name + process id: unique among the controllers of one machine.
fn default_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "controller".to_string());
    format!("{host}-{}", std::process::id())
}
