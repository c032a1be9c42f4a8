"""Share-group consume rate (KIP-932) against a classic consumer group's, on the same topic,
in one run.

    python -m bench.bench_share_groups [--messages 200000] [--partitions 4] [--rounds 3]
        [--flush-mode fsync|interval] [--no-warmup]

Setup: a real ``strata serve`` subprocess; ``--messages`` 100-byte records produced once
(librdkafka, acks=all) into a ``--partitions`` topic; unless ``--no-warmup``, a classic and
a share consumer read a 1,000-record topic first, unmeasured (the internal topics
``__consumer_offsets`` and ``__share_group_state`` then exist and are loaded, as on a
running broker). Then, alternating ``--rounds`` times:

  1. Classic (baseline): one confluent-kafka ``Consumer`` subscribed in a fresh group
     from the earliest offset, reading every record.
  2. Share: one confluent-kafka ``ShareConsumer`` in a fresh share group
     (``share.auto.offset.reset=earliest`` set with IncrementalAlterConfigs), implicit
     acknowledgement (every record accepted, the acknowledgements riding on the next
     ShareFetch and persisted to ``__share_group_state`` before they are answered).

Each consumer runs in its own process; the rate counts from its first record to the last.
Prints both rates, the share/classic ratio of each round, their median (the target is
>= 0.5: a share group keeps an in-flight window and writes its state, acks=all, before
each acknowledgement is answered, which a classic group does not) and the load average
(the figures are noisy on a shared machine: compare only within one run).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench.bench_groups import create_topic, start_broker, stop_broker

VALUE = b"x" * 100


def produce(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.num.messages": 1000})
    for _ in range(n):
        while True:
            try:
                p.produce(topic, VALUE)
                break
            except BufferError:
                p.poll(0.05)
    p.flush(120)


def set_earliest(bootstrap: str, group: str) -> None:
    from kclient import KafkaClient
    from kwire import ApiKey
    from kwire.address import HostPort
    from kwire.messages.alter_configs import (
        AlterableConfigOp,
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResource,
    )

    host, port = bootstrap.rsplit(":", 1)
    res = IncrementalAlterConfigsResource(
        resource_type=32,
        resource_name=group,
        configs=(AlterableConfigOp(name="share.auto.offset.reset", value="earliest"),),
    )
    with KafkaClient.connect(HostPort(host, int(port)), timeout=30) as c:
        resp = c.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, IncrementalAlterConfigsRequest(resources=(res,)))
    assert resp.responses[0].error_code == 0, resp


def consume(bootstrap: str, topic: str, group: str, n: int, share: bool, out: mp.Queue) -> None:  # type: ignore[type-arg]
    from confluent_kafka import Consumer, ShareConsumer

    got = 0
    first = 0.0
    if share:
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        c.subscribe([topic])
        deadline = time.monotonic() + 600
        while got < n and time.monotonic() < deadline:
            msgs = [m for m in c.poll(1.0) if m.error() is None]
            if msgs and not first:
                first = time.monotonic()
            got += len(msgs)
        end = time.monotonic()
        c.close()
    else:
        cc = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
        cc.subscribe([topic])
        deadline = time.monotonic() + 600
        while got < n and time.monotonic() < deadline:
            for m in cc.consume(1000, 1.0):
                if m.error() is None:
                    if not first:
                        first = time.monotonic()
                    got += 1
        end = time.monotonic()
        cc.close()
    out.put((got, (got - 1) / (end - first) if got > 1 and end > first else 0.0))


def run(bootstrap: str, topic: str, n: int, share: bool, round_no: int) -> float:
    group = f"bench-{'share' if share else 'classic'}-{round_no}"
    if share:
        set_earliest(bootstrap, group)
    ctx = mp.get_context("spawn")
    q: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
    proc = ctx.Process(target=consume, args=(bootstrap, topic, group, n, share, q))
    proc.start()
    got, rate = q.get(timeout=900)
    proc.join(60)
    if got < n:
        raise RuntimeError(f"{'share' if share else 'classic'} consumer read {got} of {n} records")
    return float(rate)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--flush-mode",
        choices=["fsync", "interval"],
        default="fsync",
        help="The broker's strata.flush.mode (interval: Kafka's durability model, by replication).",
    )
    ap.add_argument(
        "--no-warmup",
        dest="warmup",
        action="store_false",
        help="Measure from a broker whose internal topics are not created yet.",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proc, bootstrap = start_broker(Path(tmp) / "data", {"STRATA_LOG_STRATA_FLUSH_MODE": args.flush_mode})
        try:
            create_topic(bootstrap, "bench-share", args.partitions)
            produce(bootstrap, "bench-share", args.messages)
            if args.warmup:
                # Unmeasured: both kinds of group once over a small topic, so that the
                # measured rounds find __consumer_offsets and __share_group_state created
                # and loaded, as a running broker has them.
                create_topic(bootstrap, "bench-warmup", 1)
                produce(bootstrap, "bench-warmup", 1000)
                run(bootstrap, "bench-warmup", 1000, False, -1)
                run(bootstrap, "bench-warmup", 1000, True, -1)
            ratios = []
            for r in range(args.rounds):
                classic = run(bootstrap, "bench-share", args.messages, False, r)
                share = run(bootstrap, "bench-share", args.messages, True, r)
                ratios.append(share / classic)
                print(
                    f"round {r + 1}: classic {classic:,.0f} rec/s, share {share:,.0f} rec/s, "
                    f"share/classic {share / classic:.2f}",
                    flush=True,
                )
            median = statistics.median(ratios)
            print(f"median share/classic over {args.rounds} rounds: {median:.2f} (target >= 0.5)")
            print("load average: " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
        finally:
            stop_broker(proc)


if __name__ == "__main__":
    main()
