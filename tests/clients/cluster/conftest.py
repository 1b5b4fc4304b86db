"""Fixtures of the cluster-mode tests.

- `kafka_cluster` (session): the 3-broker Kafka 4.3 KRaft cluster of scripts/kafka-cluster
  on 127.0.0.1 (nodes on $NAGARE_TEST_KAFKA_BASEPORT, default 19092, and the two ports
  after it). Started the first time a cluster test asks for it, so the rest of the suite
  never waits for it, and stopped after the last cluster test (the rest of the suite does
  not share the machine with three idle brokers). A cluster that is already
  running on those ports (e.g. started by hand while developing) is used as it is and left
  running. `session_cluster` is the same cluster before it is started.
- `gateway_factory`: nagare gateways (`serve --store kafka://... --node-id N`) with their
  own data directories and loopback ports; stopped at the end of the test.
- `gateways`: gateways A (node id 1) and B (node id 2), both ready (`/healthz` 200).

Gateway logs are printed when a test fails.
"""

import pathlib

import pytest

from clusterutil import Gateway, KafkaCluster

# Test modules elsewhere in the suite do `from conftest import BIN, Nagare`, and whichever
# conftest.py pytest imported last is `conftest` then: this one offers the same names.
from clusterutil import BIN, Nagare  # noqa: E402,F401


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


def pytest_collection_modifyitems(session, config, items):
    """The unreachable-cluster test goes first among the cluster tests: while the session's
    cluster has not started yet, it can use that one as its cluster that is down and then
    start it for everyone, instead of starting a second cluster of its own."""
    here = pathlib.Path(__file__).resolve().parent
    mine = [i for i in items if here in pathlib.Path(str(i.path)).resolve().parents]
    first = [i for i in mine if pathlib.Path(str(i.path)).name == "test_cluster_unreachable.py"]
    if not first:
        return
    positions = [k for k, i in enumerate(items) if i in mine]
    for k, item in zip(positions, first + [i for i in mine if i not in first]):
        items[k] = item


def _is_cluster_test(item):
    here = pathlib.Path(__file__).resolve().parent
    return item is not None and here in pathlib.Path(str(item.path)).resolve().parents


# The session's cluster and whether this session started it (set by `session_cluster`).
_SESSION = {}


def _stop_session_cluster():
    if _SESSION.get("state", {}).get("started_here"):
        _SESSION["state"]["started_here"] = False
        _SESSION["cluster"].stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After the last cluster test (its gateways are stopped by then), the cluster stops
    too: the cluster tests run together (see pytest_collection_modifyitems)."""
    yield
    if _is_cluster_test(item) and not _is_cluster_test(nextitem):
        _stop_session_cluster()


@pytest.fixture(scope="session")
def session_cluster():
    """The session's cluster whether it runs or not: (cluster, state). It is stopped after
    the last cluster test if this session started it."""
    cluster = KafkaCluster()
    state = {"started_here": False}
    _SESSION.update(cluster=cluster, state=state)
    yield cluster, state
    _stop_session_cluster()


@pytest.fixture(scope="session")
def kafka_cluster(session_cluster):
    cluster, state = session_cluster
    if not cluster.running():
        cluster.start()
        state["started_here"] = True
    return cluster


@pytest.fixture
def gateway_factory(tmp_path, request):
    """make(node_id, config=None, store=None, ready=True) starts a gateway; `store`
    defaults to the session cluster (started then, and any node a previous test left
    dead restarted), `config` is nagare.toml text."""
    made = []

    def make(node_id, config=None, store=None, ready=True, extra_args=()):
        if store is None:
            cluster = request.getfixturevalue("kafka_cluster")
            if not made:
                cluster.ensure_all_running()
            store = cluster.store
        d = tmp_path / f"gw{node_id}-{len(made)}"
        d.mkdir()
        g = Gateway(d / "data", store, node_id, config, extra_args)
        made.append(g)
        g.start()
        if ready:
            g.wait_ready()
        return g

    yield make
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for g in made:
        if failed:
            print(f"\n----- gateway {g.node_id} log ({g.log_path}) -----\n{g.read_log()}")
        if g.alive():
            try:
                g.stop()
            except RuntimeError as e:
                print(e)


@pytest.fixture
def gateways(gateway_factory):
    """Gateways A and B in front of the session cluster, both ready."""
    a = gateway_factory(1, ready=False)
    b = gateway_factory(2, ready=False)
    return a.wait_ready(), b.wait_ready()
