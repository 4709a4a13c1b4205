//! kvik-bench: a load generator for Redis-protocol servers.
//!
//! It takes redis-benchmark's everyday flags with the same meaning (`-h -p -a -c -n -r -d -P
//! -t -q --threads --csv`, and an arbitrary command after the flags with `__rand_int__`), and
//! adds what measuring kvik needs: key distributions (uniform, zipf, sequential), a read:write
//! mix, value size ranges, multi-key commands with N keys, a duration instead of a count, an
//! open-loop target rate that measures latency from the intended send time, cluster routing by
//! slot, several servers, HDR-histogram percentiles (p50 p95 p99 p99.9 max) and `--json`.
//! `--plot` draws a suite summary as SVG, `--plot-series` a server's RSS and throughput over time.
//!
//! # Layout
//!
//! - [`args`]: flags, checked into a [`args::Config`].
//! - [`workload`]: the test table, key distributions, request encoding.
//! - [`engine`]: client threads with mio event loops; closed and open loop; histograms.
//! - [`reply`]: finding reply boundaries without building values.
//! - [`cluster`]: CRC16 slots, CLUSTER SLOTS, MOVED/ASK.
//! - [`report`]: summary, quiet line, CSV, JSON.
//! - [`plot`]: SVG plots with plotters.
//! - [`series`]: the time-series plot of a sampled server (bench/scale.sh).
//!
//! Every run is bounded (a request count or a duration, and a 30 s limit without replies) and
//! reaches only the addresses given, plus loopback nodes a cluster redirects to.

mod args;
mod cluster;
mod engine;
mod plot;
mod reply;
mod report;
mod series;
mod workload;

use std::io::{IsTerminal, Write};
use std::net::IpAddr;
use std::process::ExitCode;

use clap::Parser;
use kvik_resp::Frame;

use crate::args::{Cli, Config};
use crate::engine::Route;

fn route_for(cfg: &Config) -> Result<Route, String> {
    let allowed_ips: Vec<IpAddr> = cfg.servers.iter().map(|a| a.ip()).collect();
    if !cfg.cluster {
        return Ok(Route {
            nodes: cfg.servers.clone(),
            slots: None,
            allowed_ips,
        });
    }
    let first = cfg.servers[0];
    let mut s = engine::handshake(first, cfg)?;
    let reply = engine::query(&mut s, &[b"CLUSTER", b"SLOTS"])?;
    if let Frame::Error(e) = &reply {
        return Err(format!("CLUSTER SLOTS on {first}: {e}"));
    }
    let ranges = cluster::parse_cluster_slots(&reply, first.ip())?;
    if ranges.is_empty() {
        return Err(format!("CLUSTER SLOTS on {first}: no slots assigned"));
    }
    let mut nodes = Vec::new();
    let mut slots = vec![0u16; cluster::SLOTS];
    for (a, b, addr) in ranges {
        if !addr.ip().is_loopback() && !allowed_ips.contains(&addr.ip()) {
            return Err(format!(
                "cluster node {addr} is neither loopback nor a given host: refusing"
            ));
        }
        let idx = match nodes.iter().position(|n| *n == addr) {
            Some(i) => i,
            None => {
                nodes.push(addr);
                nodes.len() - 1
            }
        };
        for s in a..=b.min(cluster::SLOTS as u16 - 1) {
            slots[s as usize] = idx as u16;
        }
    }
    Ok(Route {
        nodes,
        slots: Some(slots),
        allowed_ips,
    })
}

fn run(cfg: Config) -> Result<(), String> {
    let route = route_for(&cfg)?;
    let tests = workload::tests_for(&cfg);
    if tests.is_empty() {
        return Err("no test selected (see -t)".into());
    }
    let live = std::io::stdout().is_terminal() && !cfg.quiet && !cfg.csv && !cfg.json;
    if cfg.csv {
        println!("{}", report::CSV_HEADER);
    }
    let mut results = Vec::new();
    for test in &tests {
        let name = test.name.clone();
        let r = engine::run_test(&cfg, test, &route, |done, secs| {
            if live {
                print!(
                    "\r{name}: {done} requests, rps={:.1}\x1b[K",
                    done as f64 / secs.max(1e-9)
                );
                std::io::stdout().flush().ok();
            }
        })?;
        if live {
            print!("\r\x1b[K");
        }
        if r.errors > 0 && !cfg.json {
            eprintln!(
                "kvik-bench: {}: {} of {} replies were errors, e.g. {}",
                r.name,
                r.errors,
                r.requests,
                r.error_samples.first().map(String::as_str).unwrap_or("")
            );
        }
        if cfg.csv {
            println!("{}", report::csv_row(&r));
        } else if cfg.json {
        } else if cfg.quiet {
            println!("{}", report::quiet_line(&r, cfg.precision));
        } else {
            println!("{}", report::summary(&r, &cfg));
        }
        results.push(r);
    }
    if cfg.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report::json_doc(&cfg, &results)).unwrap()
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let plotted = match (&cli.plot, &cli.plot_series) {
        (Some(input), _) => Some(plot::plot(input, &cli.plot_out)),
        (None, Some(input)) => Some(series::plot(input, &cli.plot_title, &cli.plot_out)),
        (None, None) => None,
    };
    if let Some(result) = plotted {
        return match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("kvik-bench: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let cfg = match Config::from_cli(cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("kvik-bench: {e}");
            return ExitCode::from(2);
        }
    };
    match run(cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kvik-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
