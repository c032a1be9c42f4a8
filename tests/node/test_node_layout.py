"""The pure parts of a node of several processes: where partitions live (plan_homes),
replica placement that never puts two replicas on one machine, and the process specs."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.supervisor import WorkerSpec, own_port, resolve_processes, worker_config
from broker.config import BrokerConfig
from broker.controller import check_machines, place_replicas
from broker.node_layout import NodeLayout, plan_homes
from hot.errors import InvalidConfigError, InvalidReplicaAssignmentError, InvalidReplicationFactorError
from kwire.address import HostPort


def test_partitions_stay_home_when_n_is_unchanged() -> None:
    where = {("t", p): 1 + p % 3 for p in range(9)}
    assert plan_homes(where, 3) == where


def test_shrinking_moves_only_the_partitions_of_the_processes_that_go() -> None:
    where = {("t", p): 1 + p % 4 for p in range(8)}
    home = plan_homes(where, 2)
    assert all(home[tp] == k for tp, k in where.items() if k <= 2)
    assert sorted(home.values()).count(1) == sorted(home.values()).count(2) == 4


def test_growing_evens_out_and_homeless_partitions_go_to_the_emptiest() -> None:
    where: dict[tuple[str, int], int | None] = {("t", p): 1 for p in range(6)}
    where[("u", 0)] = None
    home = plan_homes(where, 3)
    counts = [[tp for tp in home if tp[0] == "t" and home[tp] == k] for k in (1, 2, 3)]
    assert [len(c) for c in counts] == [2, 2, 2]
    assert home[("u", 0)] in (1, 2, 3)
    assert plan_homes(home, 3) == home  # stable once balanced


@given(
    st.dictionaries(
        st.tuples(st.sampled_from("abc"), st.integers(0, 20)),
        st.one_of(st.none(), st.integers(1, 9)),
        max_size=60,
    ),
    st.integers(1, 8),
)
def test_plan_is_balanced_and_within_range(where: dict[tuple[str, int], int | None], n: int) -> None:
    home = plan_homes(where, n)
    assert set(home) == set(where)
    assert all(1 <= k <= n for k in home.values())
    for topic in {tp[0] for tp in where}:
        mine = {tp: k for tp, k in where.items() if tp[0] == topic}
        counts = [sum(1 for tp in mine if home[tp] == k) for k in range(1, n + 1)]
        assert max(counts) - min(counts) <= 1  # each topic over every process
        # A partition on a surviving process moves only if that process held more than its share.
        share = -(-len(mine) // n)
        for tp, k in mine.items():
            if k is not None and k <= n and home[tp] != k:
                assert sum(1 for v in mine.values() if v == k) > share - 1


def test_placement_never_puts_two_replicas_on_one_machine() -> None:
    machines = {0: "a", 1001: "a", 1: "b", 1002: "b", 2: "c", 1003: "c"}
    placed = place_replicas(30, 3, machines, start_index=4, machines=machines)
    for replicas in placed:
        assert len({machines[b] for b in replicas}) == 3
    leaders = [r[0] for r in placed]
    assert {leaders.count(b) for b in machines} == {5}  # leaders over every process


def test_placement_refuses_more_replicas_than_machines() -> None:
    machines = {0: "a", 1001: "a", 1002: "a"}
    with pytest.raises(InvalidReplicationFactorError, match="1 machine"):
        place_replicas(1, 2, machines, machines=machines)
    assert place_replicas(3, 1, machines, machines=machines) == ((0,), (1001,), (1002,))


def test_placement_without_machines_is_unchanged() -> None:
    assert place_replicas(4, 2, [1, 2, 3]) == place_replicas(4, 2, [1, 2, 3], machines={})


def test_manual_assignment_on_one_machine_is_refused() -> None:
    with pytest.raises(InvalidReplicaAssignmentError, match="one machine"):
        check_machines((0, 1001), {0: "a", 1001: "a"}, "replicas")
    check_machines((0, 1), {0: "a", 1001: "a"}, "replicas")


def test_layout_and_processes() -> None:
    layout = NodeLayout(Path("/d"))
    assert layout.process_dir(1) == Path("/d")
    assert layout.process_dir(3) == Path("/d/processes/3")
    assert resolve_processes("4") == 4
    assert resolve_processes("auto") >= 1
    for bad in ("0", "x", "300"):
        with pytest.raises(InvalidConfigError):
            resolve_processes(bad)


def test_worker_config_own_ports_and_shared_bucket() -> None:
    config = BrokerConfig(
        data_dir=Path("/d"),
        kafka_listen=HostPort("0.0.0.0", 9092),
        advertised_listener=HostPort("node.example", 9092),
        internal_listen=HostPort("10.0.0.1", 9192),
    )
    spec = WorkerSpec(3, 4, 1002, "/d/processes/3", "m", "/d/meta/store.sock", 5, 6)
    wc = worker_config(config, spec)
    assert wc.kafka_listen == HostPort("0.0.0.0", 9095)
    assert wc.advertised == HostPort("node.example", 9095)
    assert wc.internal_listen == HostPort("10.0.0.1", 9194)
    assert wc.object_store_url == config.object_store_url  # the node's bucket, not the process dir's
    assert wc.data_dir == Path("/d/processes/3") and wc.broker_id == 1002
    assert wc.cluster is not None and wc.cluster.store_socket == Path("/d/meta/store.sock")
    assert own_port(0, 3) == 0
    assert WorkerSpec.from_json(spec.to_json()) == spec
