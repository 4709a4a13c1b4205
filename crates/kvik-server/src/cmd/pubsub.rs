//! Pub/Sub commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, SSUBSCRIBE,
//! SUNSUBSCRIBE, PUBLISH, SPUBLISH and PUBSUB CHANNELS / NUMSUB / NUMPAT / SHARDCHANNELS /
//! SHARDNUMSUB, over the registry in [`crate::pubsub`].
//!
//! Confirmations are pushes (`>3` in RESP3, `*3` in RESP2). Before writing one, a handler moves
//! the messages already in the client's mailbox into its reply, so a client sees every message
//! published before it unsubscribed ahead of the confirmation, as with Redis. While a RESP2
//! client is subscribed, the dispatcher refuses every command whose spec is not marked
//! `in_subscribe` (see `cmd::execute`). Shard channels are keys for cluster routing (MOVED,
//! CROSSSLOT), as in Redis 7.0.

use super::admin::{help_reply, subcommand_syntax};
use super::cached::{CacheCtx, KeyReads, RtcError};
use super::ctx::{Args, CmdResult, Ctx};
use super::spec::{CommandSpec, Flags, KeySpec};
use crate::pubsub::Scope;
use kvik_resp::encode;
use std::sync::atomic::Ordering::Relaxed;

const PUBSUB: Flags = Flags::PUBSUB.union(Flags::LOADING).union(Flags::STALE);
const SUBSCRIBE: Flags = PUBSUB.union(Flags::NOSCRIPT);
const ACL: &[&str] = &["pubsub", "slow"];
const ACL_FAST: &[&str] = &["pubsub", "fast"];

const fn pubsub_command(
    name: &'static str,
    arity: i32,
    flags: Flags,
    keys: KeySpec,
    handler: super::spec::Handler,
    acl: &'static [&'static str],
) -> CommandSpec {
    CommandSpec::new(name, arity, flags, keys, handler)
        .acl(acl)
        .group("pubsub")
}

pub static COMMANDS: &[CommandSpec] = &[
    pubsub_command("subscribe", -2, SUBSCRIBE, KeySpec::NONE, subscribe, ACL)
        .in_subscribe()
        .doc(
            "Listens for messages published to channels.",
            "2.0.0",
            "O(N) where N is the number of channels to subscribe to.",
        ),
    pubsub_command("unsubscribe", -1, SUBSCRIBE, KeySpec::NONE, unsubscribe, ACL)
        .in_subscribe()
        .doc(
            "Stops listening to messages posted to channels.",
            "2.0.0",
            "O(N) where N is the number of channels to unsubscribe.",
        ),
    pubsub_command("psubscribe", -2, SUBSCRIBE, KeySpec::NONE, psubscribe, ACL)
        .in_subscribe()
        .doc(
            "Listens for messages published to channels that match one or more patterns.",
            "2.0.0",
            "O(N) where N is the number of patterns to subscribe to.",
        ),
    pubsub_command(
        "punsubscribe",
        -1,
        SUBSCRIBE,
        KeySpec::NONE,
        punsubscribe,
        ACL,
    )
    .in_subscribe()
    .doc(
        "Stops listening to messages published to channels that match one or more patterns.",
        "2.0.0",
        "O(N) where N is the number of patterns to unsubscribe.",
    ),
    pubsub_command("ssubscribe", -2, SUBSCRIBE, KeySpec::ALL, ssubscribe, ACL)
        .in_subscribe()
        .doc(
            "Listens for messages published to shard channels.",
            "7.0.0",
            "O(N) where N is the number of shard channels to subscribe to.",
        ),
    pubsub_command(
        "sunsubscribe",
        -1,
        SUBSCRIBE,
        KeySpec::ALL,
        sunsubscribe,
        ACL,
    )
    .in_subscribe()
    .doc(
        "Stops listening to messages posted to shard channels.",
        "7.0.0",
        "O(N) where N is the number of shard channels to unsubscribe.",
    ),
    pubsub_command(
        "publish",
        3,
        PUBSUB.union(Flags::FAST).union(Flags::MAY_REPLICATE),
        KeySpec::NONE,
        publish,
        ACL_FAST,
    )
    .rtc(publish_rtc)
    .doc(
        "Posts a message to a channel.",
        "2.0.0",
        "O(N+M) where N is the number of clients subscribed to the receiving channel and M is the total number of subscribed patterns (by any client).",
    ),
    pubsub_command(
        "spublish",
        3,
        PUBSUB.union(Flags::FAST).union(Flags::MAY_REPLICATE),
        KeySpec::ONE,
        spublish,
        ACL_FAST,
    )
    .doc(
        "Post a message to a shard channel",
        "7.0.0",
        "O(N) where N is the number of clients subscribed to the receiving shard channel.",
    ),
    pubsub_command(
        "pubsub",
        -2,
        Flags::empty(),
        KeySpec::NONE,
        super::spec::container,
        &["slow"],
    )
    .doc(
        "A container for Pub/Sub commands.",
        "2.8.0",
        "Depends on subcommand.",
    )
    .subs(PUBSUB_SUBS),
];

static PUBSUB_SUBS: &[CommandSpec] = &[
    pubsub_command("channels", -2, PUBSUB, KeySpec::NONE, channels, ACL).doc(
        "Returns the active channels.",
        "2.8.0",
        "O(N) where N is the number of active channels, and assuming constant time pattern matching (relatively short channels and patterns)",
    ),
    pubsub_command("numsub", -2, PUBSUB, KeySpec::NONE, numsub, ACL).doc(
        "Returns a count of subscribers to channels.",
        "2.8.0",
        "O(N) for the NUMSUB subcommand, where N is the number of requested channels",
    ),
    pubsub_command("numpat", 2, PUBSUB, KeySpec::NONE, numpat, ACL).doc(
        "Returns a count of unique pattern subscriptions.",
        "2.8.0",
        "O(1)",
    ),
    pubsub_command(
        "shardchannels",
        -2,
        PUBSUB,
        KeySpec::NONE,
        shardchannels,
        ACL,
    )
    .doc(
        "Returns the active shard channels.",
        "7.0.0",
        "O(N) where N is the number of active shard channels, and assuming constant time pattern matching (relatively short shard channels).",
    ),
    pubsub_command(
        "shardnumsub",
        -2,
        PUBSUB,
        KeySpec::NONE,
        shardnumsub,
        ACL,
    )
    .doc(
        "Returns the count of subscribers of shard channels.",
        "7.0.0",
        "O(N) for the SHARDNUMSUB subcommand, where N is the number of requested shard channels",
    ),
    pubsub_command("help", 2, PUBSUB, KeySpec::NONE, pubsub_help, &["slow"]).doc(
        "Returns helpful text about the different subcommands.",
        "6.2.0",
        "O(1)",
    ),
];

fn subscribe(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    subscribe_to(ctx, args, Scope::Channel)
}

fn psubscribe(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    subscribe_to(ctx, args, Scope::Pattern)
}

fn ssubscribe(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    subscribe_to(ctx, args, Scope::Shard)
}

fn unsubscribe(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    unsubscribe_from(ctx, args, Scope::Channel)
}

fn punsubscribe(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    unsubscribe_from(ctx, args, Scope::Pattern)
}

fn sunsubscribe(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    unsubscribe_from(ctx, args, Scope::Shard)
}

/// Moves the messages waiting in the client's mailbox into the reply, ahead of what follows.
fn flush_mailbox(ctx: &mut Ctx<'_>) {
    let waiting = ctx.session.client.mailbox.take();
    ctx.out.buf.extend_from_slice(&waiting);
}

/// One confirmation: `[word, name or null, count]` as a push.
fn confirm(ctx: &mut Ctx<'_>, scope: Scope, subscribe: bool, name: Option<&[u8]>) {
    let count = ctx.session.subs.reply_count(scope);
    encode::push_header(&mut ctx.out.buf, 3, ctx.out.proto);
    ctx.out.bulk(scope.reply_word(subscribe));
    ctx.out.bulk_or_null(name);
    ctx.out.int(count as i64);
}

fn subscribe_to(ctx: &mut Ctx<'_>, args: &Args, scope: Scope) -> CmdResult {
    let registry = ctx.server.pubsub.clone();
    let client = ctx.session.client.clone();
    flush_mailbox(ctx);
    for name in &args[1..] {
        ctx.session.subs.subscribe(&registry, &client, scope, name);
        confirm(ctx, scope, true, Some(name));
    }
    Ok(())
}

fn unsubscribe_from(ctx: &mut Ctx<'_>, args: &Args, scope: Scope) -> CmdResult {
    flush_mailbox(ctx);
    let names = if args.len() > 1 {
        args[1..].to_vec()
    } else {
        ctx.session.subs.names(scope)
    };
    if names.is_empty() {
        confirm(ctx, scope, false, None);
    }
    for name in names {
        ctx.session.subs.unsubscribe(scope, &name);
        confirm(ctx, scope, false, Some(&name));
    }
    Ok(())
}

/// PUBLISH: delivers here and, in cluster mode, queues the message for the other nodes (see
/// `crate::pubsub::forward`). Replies the receivers on this node, as Redis in a cluster.
fn publish(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let server = ctx.server;
    let receivers = server.pubsub.publish(&args[1], &args[2]);
    if let Some(node) = server.cluster.node() {
        let state = node.state.read();
        let password = server.config.requirepass.read().clone();
        let peers = || {
            state
                .topology
                .nodes
                .iter()
                .enumerate()
                .filter(|(i, _)| Some(*i) != state.me)
                .map(|(_, n)| (n.host.clone(), n.port))
                .collect()
        };
        server
            .pubsub
            .forward(state.generation, password, peers, &args[1], &args[2]);
    }
    ctx.out.int(receivers as i64);
    Ok(())
}

/// PUBLISH on the I/O thread (no pool round trip): when there is nothing to forward (not in
/// cluster mode) and at most `pubsub-rtc-max-receivers` receivers; a bigger fan-out goes to a
/// worker, so the other connections of that I/O thread do not wait for it.
fn publish_rtc(ctx: &mut CacheCtx<'_>, args: &Args) -> Result<(), RtcError> {
    let max = ctx.pubsub().settings().rtc_max_receivers.load(Relaxed) as usize;
    if ctx.cluster_mode() || ctx.pubsub().receivers_bound(&args[1]) > max {
        return Err(RtcError::Miss);
    }
    let receivers = ctx.pubsub().publish(&args[1], &args[2]);
    ctx.out().int(receivers as i64);
    Ok(())
}

/// CLUSTER PUBLISH channel message: a PUBLISH forwarded by another node of the cluster,
/// delivered on this node only (never forwarded again).
pub fn cluster_publish(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let receivers = ctx.server.pubsub.publish(&args[2], &args[3]);
    ctx.out.int(receivers as i64);
    Ok(())
}

fn spublish(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let receivers = ctx.server.pubsub.spublish(&args[1], &args[2]);
    ctx.out.int(receivers as i64);
    Ok(())
}

fn active(ctx: &mut Ctx<'_>, args: &Args, scope: Scope) -> CmdResult {
    if args.len() > 3 {
        return Err(subcommand_syntax(args));
    }
    let names = ctx
        .server
        .pubsub
        .active(scope, args.get(2).map(|p| p.as_ref()));
    ctx.out.array(names.len());
    for n in names {
        ctx.out.bulk(&n);
    }
    Ok(())
}

fn counts(ctx: &mut Ctx<'_>, args: &Args, scope: Scope) -> CmdResult {
    ctx.out.array((args.len() - 2) * 2);
    for channel in &args[2..] {
        ctx.out.bulk(channel);
        ctx.out.int(ctx.server.pubsub.numsub(scope, channel) as i64);
    }
    Ok(())
}

fn channels(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    active(ctx, args, Scope::Channel)
}

fn shardchannels(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    active(ctx, args, Scope::Shard)
}

fn numsub(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    counts(ctx, args, Scope::Channel)
}

fn shardnumsub(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    counts(ctx, args, Scope::Shard)
}

fn numpat(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    ctx.out.int(ctx.server.pubsub.numpat() as i64);
    Ok(())
}

fn pubsub_help(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    help_reply(
        ctx.out,
        "PUBSUB",
        &[
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: '*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
        ],
    );
    Ok(())
}
