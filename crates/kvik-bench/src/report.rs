//! Printing results: redis-benchmark's summary, quiet line and CSV, and kvik-bench's JSON.

use hdrhistogram::Histogram;
use serde_json::{json, Value};

use crate::args::{Config, Stop};
use crate::engine::TestResult;

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// avg, min, p50, p95, p99, p99.9, max in milliseconds.
pub fn latency_ms(h: &Histogram<u64>) -> [f64; 7] {
    if h.is_empty() {
        return [0.0; 7];
    }
    [
        h.mean() / 1000.0,
        ms(h.min()),
        ms(h.value_at_quantile(0.50)),
        ms(h.value_at_quantile(0.95)),
        ms(h.value_at_quantile(0.99)),
        ms(h.value_at_quantile(0.999)),
        ms(h.max()),
    ]
}

fn latency_json(h: &Histogram<u64>) -> Value {
    let l = latency_ms(h);
    json!({
        "avg": l[0], "min": l[1], "p50": l[2], "p95": l[3], "p99": l[4], "p99_9": l[5],
        "max": l[6],
    })
}

/// The CSV header (redis-benchmark's columns).
pub const CSV_HEADER: &str = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\
\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"";

/// One CSV row.
pub fn csv_row(r: &TestResult) -> String {
    let l = latency_ms(&r.total);
    format!(
        "\"{}\",\"{:.2}\",\"{:.3}\",\"{:.3}\",\"{:.3}\",\"{:.3}\",\"{:.3}\",\"{:.3}\"",
        r.name.replace('"', "\"\""),
        r.rps(),
        l[0],
        l[1],
        l[2],
        l[3],
        l[4],
        l[6]
    )
}

/// The one-line `-q` form.
pub fn quiet_line(r: &TestResult, prec: usize) -> String {
    let l = latency_ms(&r.total);
    let mut s = format!(
        "{}: {:.2} requests per second, p50={:.prec$} msec",
        r.name,
        r.rps(),
        l[2]
    );
    if r.errors > 0 {
        s.push_str(&format!(", errors={}", r.errors));
    }
    s
}

/// The full summary of one test, in redis-benchmark's layout plus p99.9.
pub fn summary(r: &TestResult, cfg: &Config) -> String {
    let mut s = String::new();
    s.push_str(&format!("====== {} ======\n", r.name));
    s.push_str(&format!(
        "  {} requests completed in {:.2} seconds\n",
        r.requests, r.seconds
    ));
    s.push_str(&format!("  {} parallel clients\n", cfg.clients));
    if cfg.data_min == cfg.data_max {
        s.push_str(&format!("  {} bytes payload\n", cfg.data_min));
    } else {
        s.push_str(&format!(
            "  {}-{} bytes payload\n",
            cfg.data_min, cfg.data_max
        ));
    }
    s.push_str("  keep alive: 1\n");
    if cfg.pipeline > 1 {
        s.push_str(&format!("  pipeline: {}\n", cfg.pipeline));
    }
    if let Some(rate) = cfg.rate {
        s.push_str(&format!(
            "  target rate: {rate} requests per second (latency from intended send time)\n"
        ));
    }
    s.push_str("\nSummary:\n");
    s.push_str(&format!(
        "  throughput summary: {:.2} requests per second\n",
        r.rps()
    ));
    s.push_str("  latency summary (msec):\n");
    s.push_str(&format!(
        "  {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}\n",
        "avg", "min", "p50", "p95", "p99", "p99.9", "max"
    ));
    let p = cfg.precision;
    let row = |l: [f64; 7]| {
        format!(
            "  {:>9.p$} {:>9.p$} {:>9.p$} {:>9.p$} {:>9.p$} {:>9.p$} {:>9.p$}\n",
            l[0], l[1], l[2], l[3], l[4], l[5], l[6]
        )
    };
    s.push_str(&row(latency_ms(&r.total)));
    if r.ops.len() > 1 {
        for o in &r.ops {
            s.push_str(&format!(
                "  {} ({} requests, {} errors):\n",
                o.name, o.requests, o.errors
            ));
            s.push_str(&row(latency_ms(&o.hist)));
        }
    }
    if r.errors > 0 {
        s.push_str(&format!(
            "  errors: {} error replies, e.g. {:?}\n",
            r.errors, r.error_samples
        ));
    }
    if r.redirects > 0 {
        s.push_str(&format!("  redirects followed: {}\n", r.redirects));
    }
    s
}

/// The JSON document of a whole run.
pub fn json_doc(cfg: &Config, results: &[TestResult]) -> Value {
    let (requests, duration) = match cfg.stop {
        Stop::Count(n) => (Some(n), None),
        Stop::Time(d, n) => (n, Some(d.as_secs_f64())),
    };
    let tests: Vec<Value> = results
        .iter()
        .map(|r| {
            json!({
                "name": r.name,
                "requests": r.requests,
                "errors": r.errors,
                "error_samples": r.error_samples,
                "redirects": r.redirects,
                "seconds": r.seconds,
                "rps": r.rps(),
                "latency_ms": latency_json(&r.total),
                "ops": r.ops.iter().map(|o| json!({
                    "name": o.name,
                    "requests": o.requests,
                    "errors": o.errors,
                    "latency_ms": latency_json(&o.hist),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "tool": "kvik-bench",
        "version": env!("CARGO_PKG_VERSION"),
        "config": {
            "servers": cfg.servers.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            "cluster": cfg.cluster,
            "clients": cfg.clients,
            "threads": cfg.threads,
            "pipeline": cfg.pipeline,
            "requests": requests,
            "duration_s": duration,
            "rate": cfg.rate,
            "keyspace": cfg.keyspace,
            "dist": format!("{:?}", cfg.dist),
            "ratio": cfg.ratio.map(|(r, w)| format!("{r}:{w}")),
            "keys": cfg.keys,
            "data_size": [cfg.data_min, cfg.data_max],
        },
        "tests": tests,
    })
}
