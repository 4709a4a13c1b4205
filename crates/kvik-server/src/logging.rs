//! Logging through `tracing`, at Redis's level names (`loglevel`), to standard output or to
//! `logfile`. The level can change at run time (CONFIG SET loglevel).

use crate::config::LOG_LEVELS;
use std::sync::OnceLock;
use tracing_subscriber::{filter::LevelFilter, prelude::*, reload, Registry};

static RELOAD: OnceLock<reload::Handle<LevelFilter, Registry>> = OnceLock::new();

fn level_filter(redis_level: &str) -> LevelFilter {
    let name = LOG_LEVELS
        .iter()
        .find(|(n, _)| *n == redis_level)
        .map(|(_, t)| *t)
        .unwrap_or("info");
    name.parse().unwrap_or(LevelFilter::INFO)
}

/// Installs the global subscriber. Call once, before anything logs.
pub fn init(level: &str, logfile: &str) -> Result<(), String> {
    let (filter, handle) = reload::Layer::new(level_filter(level));
    let _ = RELOAD.set(handle);
    let registry = tracing_subscriber::registry().with(filter);
    if logfile.is_empty() {
        registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
                    .with_writer(std::io::stdout),
            )
            .try_init()
            .map_err(|e| e.to_string())
    } else {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(logfile)
            .map_err(|e| format!("cannot open logfile {logfile}: {e}"))?;
        registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(false)
                    .with_writer(std::sync::Mutex::new(file)),
            )
            .try_init()
            .map_err(|e| e.to_string())
    }
}

/// Changes the level of the running subscriber.
pub fn set_level(level: &str) {
    if let Some(h) = RELOAD.get() {
        let _ = h.modify(|f| *f = level_filter(level));
    }
}
