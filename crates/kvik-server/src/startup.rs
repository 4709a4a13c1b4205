//! Startup: wires the layers together. Opens storage, builds the shared [`Server`] state,
//! starts the worker pool and the I/O threads, the signal handlers, the timer and the
//! compactor, then waits for shutdown. The only module that knows every other one.

use crate::clients::ClientIo;
use crate::config::Config;
use crate::net;
use crate::pool::Pool;
use crate::server::{install_signal_handlers, spawn_compactor, spawn_saver, spawn_timer, Server};
use crate::storage::Storage;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Runs the server until it is shut down.
pub fn run(config: Config) -> Result<(), String> {
    crate::server::survive_file_size_limit()?;
    crate::acl::file::at_startup(&config)?;
    let dir = config.dir.read().clone();
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("cannot create dir {}: {e}", dir.display()))?;
    let split = config.memory_split();
    let storage = Storage::open_tuned(
        &dir,
        crate::cache::Cache::new(config.cache_settings()),
        &config.storage_tuning(),
    )
    .map_err(|e| format!("cannot open storage in {}: {e}", dir.display()))?;
    tracing::info!(
        budget = split.total,
        auto = split.auto,
        hot_cache = split.hot_cache,
        block_cache = split.block_cache,
        write_buffers = split.write_buffers,
        reserve = split.reserve,
        "memory budget"
    );
    storage.set_fsync_policy(*config.appendfsync.read());
    let commands = crate::cmd::table().names();
    let server = Arc::new(Server::new(config, storage, commands));
    server.set_self();
    crate::replication::checkpoint::clean(&server);
    server.apply_group_commit();
    server.apply_repl_backlog();
    server.apply_allocator();
    server.check_write_health();
    if server.config.cluster.enabled.load(Ordering::Relaxed) {
        server.cluster.enable(&dir)?;
    }
    crate::cmd::script::load_persisted(&server)?;

    // The role is set before clients can connect, so a replica never takes a write. In
    // cluster mode the persisted topology decides it.
    crate::cluster::replicas::configure_at_start(&server);
    crate::replication::Replication::init(&server)
        .map_err(|e| format!("cannot read the replication state: {e}"))?;

    let workers = server.config.workers();
    let pool: Arc<dyn Pool> = crate::pool::start(&server.config.pool, workers);
    let _ = server.pool.set(pool.clone());
    let slow_lane_threads = server.config.slow_lane_threads.load(Ordering::Relaxed);
    server.slow_lane.start(slow_lane_threads as usize);
    let net = net::start(server.clone(), pool.clone())?;
    let io: Vec<Arc<dyn ClientIo>> = net.handles.iter().map(|h| h.clone() as _).collect();
    let _ = server.io_handles.set(io);
    install_signal_handlers(server.clone())?;
    let wal_sync = net::spawn_wal_sync(server.clone());
    let timer = spawn_timer(server.clone());
    let compactor = spawn_compactor(server.clone());
    let saver = spawn_saver(server.clone());

    tracing::info!(
        "kvik {} ready to accept connections on port {} (data in {})",
        env!("CARGO_PKG_VERSION"),
        server.port.load(Ordering::Relaxed),
        dir.display()
    );
    net.join();
    server.wal_sync.stop();
    let _ = wal_sync.join();
    pool.shutdown();
    server.slow_lane.shutdown();
    let _ = timer.join();
    let _ = compactor.join();
    let _ = saver.join();
    server
        .storage
        .sync_wal()
        .map_err(|e| format!("final WAL sync failed: {e}"))?;
    tracing::info!("kvik is now ready to exit, bye bye...");
    Ok(())
}
