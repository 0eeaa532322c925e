"""The node's network: addresses no packet can carry off the machine, and all of it undone.

Pods and Services take addresses from the range reserved for benchmarking networks
(``198.18.0.0/15``, RFC 2544), never a private range this machine or its network may use.
Before anything starts, that whole range gets an ``unreachable`` route: a packet for it
that no more specific route claims fails at the route lookup, whatever else fails. Then:

- a bridge (``BRIDGE``) holding the pods, whose address (``GATEWAY``) is the node's: the
  API server, the kubelet and the cluster DNS listen there, which pods reach;
- a route for the Service range through the bridge: a host ``connect()`` to a ClusterIP
  must pass the route lookup before kube-proxy's DNAT rewrites it to a pod;
- the pods themselves get routes for the reserved range only (``CNI_CONFIG``): no default
  route, so nothing they send can be addressed beyond it;
- forwarding on, as a node needs (a pod reaching another through a Service is routed back
  onto the bridge), with a ``FORWARD`` guard that accepts only bridge to bridge and drops
  whatever else would cross it — and, if the machine did not forward before, drops all other
  forwarding, so the machine routes nothing it did not route before;
- an ``INPUT`` guard for the same range: a packet for the node's addresses is taken only from
  the bridge (its pods) or from the machine itself (``lo``). The API server, the kubelet, the
  cluster DNS and kube-proxy's ports listen on ``GATEWAY``, and a host of the same network
  segment that routes the range to this machine would otherwise reach them all.

Everything changed is recorded as it is made (``Changes``) and undone in reverse, the
kernel settings put back to the values read before, and a route the machine had for the
range put back as it was: a node stopped — or one that failed to start — leaves no route,
rule, interface or setting behind, and takes none away.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path

from control_plane.errors import ClusterUnavailableError

__all__ = ["BRIDGE", "GATEWAY", "POD_RANGE", "RESERVED", "SERVICE_RANGE", "Changes",
           "cni_config", "guard_first", "route_of", "set_up"]

RESERVED = "198.18.0.0/15"
POD_RANGE = "198.18.0.0/24"
GATEWAY = "198.18.0.1"
SERVICE_RANGE = "198.19.0.0/24"
BRIDGE = "kcg0"
GUARD = "KCG-NODE-GUARD"
INPUT_GUARD = "KCG-NODE-INPUT"
# kernel settings the node's parts write (forwarding, bridge netfilter; the kubelet's and
# kube-proxy's own): each read before and written back after
SETTINGS = ("net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables",
            "net/ipv4/conf/all/route_localnet", "vm/overcommit_memory", "vm/panic_on_oom",
            "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys",
            "kernel/keys/root_maxbytes")


def _run(*args: str) -> None:
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        raise ClusterUnavailableError(f"{' '.join(args)} failed: {done.stderr.strip()}")


def _quiet(*args: str) -> None:
    subprocess.run(args, capture_output=True)


class Changes:
    """What was changed, each with its undoing; ``undo`` runs them newest first, each
    whatever the others do."""

    def __init__(self) -> None:
        self._undo: list[tuple[str, Callable[[], None]]] = []

    def made(self, what: str, undo: Callable[[], None]) -> None:
        self._undo.append((what, undo))

    def undo(self) -> list[str]:
        """Undo everything; return what could not be undone (and why)."""
        failed = []
        while self._undo:
            what, undo = self._undo.pop()
            try:
                undo()
            except Exception as exc:  # noqa: BLE001 - the rest is still undone
                failed.append(f"{what}: {exc}")
        return failed


def _read(setting: str) -> str | None:
    try:
        return (Path("/proc/sys") / setting).read_text().strip()
    except OSError:
        return None


def _write(setting: str, value: str) -> None:
    (Path("/proc/sys") / setting).write_text(value + "\n")


_TABLES = ("filter", "nat", "mangle")
_OURS = ("KUBE-", "CNI-")  # the chains the kubelet, kube-proxy and CNI plugins make


def _chains() -> dict[str, tuple[set[str], list[str]]]:
    """Each table's chains and rules, as ``iptables-save`` prints them."""
    found = {}
    for table in _TABLES:
        done = subprocess.run(["iptables-save", "-t", table], capture_output=True, text=True)
        lines = done.stdout.splitlines()
        found[table] = ({line[1:].split()[0] for line in lines if line.startswith(":")},
                        [line for line in lines if line.startswith("-A ")])
    return found


def _remove_new_chains(before: dict[str, tuple[set[str], list[str]]]) -> None:
    """Remove the node's chains (``_OURS`` not there before) and every rule that jumps to one:
    ``kube-proxy --cleanup`` leaves the kubelet's, and a crash leaves anyone's."""
    for table, (chains, rules) in _chains().items():
        new = {c for c in chains - before[table][0] if c.startswith(_OURS)}
        for rule in rules:
            words = shlex.split(rule)
            if words[1] not in new and any(w in new for w in words[2:]):
                _quiet("iptables", "-t", table, "-D", *words[1:])
        for chain in new:
            _quiet("iptables", "-t", table, "-F", chain)
        for chain in new:
            _quiet("iptables", "-t", table, "-X", chain)


def set_up(changes: Changes) -> None:
    """Make the node's network (see the module), each step recorded in ``changes``.

    Raises:
        ClusterUnavailableError: a step failed (what was made is in ``changes``).
    """
    chains = _chains()
    changes.made("iptables chains", lambda: _remove_new_chains(chains))
    before = {s: _read(s) for s in SETTINGS}
    changes.made("kernel settings", lambda: [_write(s, v) for s, v in before.items()
                                             if v is not None and _read(s) != v])
    held = route_of(RESERVED)
    _run("ip", "route", "replace", "unreachable", RESERVED)
    changes.made("the unreachable route", lambda: _put_back_route(held))
    _quiet("ip", "link", "del", BRIDGE)  # one a crashed run left
    _run("ip", "link", "add", BRIDGE, "type", "bridge")
    changes.made("the bridge", lambda: _quiet("ip", "link", "del", BRIDGE))
    _run("ip", "addr", "add", f"{GATEWAY}/{POD_RANGE.split('/')[1]}", "dev", BRIDGE)
    _run("ip", "link", "set", BRIDGE, "up")
    _run("ip", "route", "replace", SERVICE_RANGE, "dev", BRIDGE)  # gone with the bridge
    forwarding = before["net/ipv4/ip_forward"] == "1"
    _quiet("iptables", "-D", "FORWARD", "-j", GUARD)
    _quiet("iptables", "-F", GUARD)
    _quiet("iptables", "-X", GUARD)
    _run("iptables", "-N", GUARD)
    changes.made("the forwarding guard", _drop_guard)
    _run("iptables", "-A", GUARD, "-i", BRIDGE, "-o", BRIDGE, "-j", "ACCEPT")
    _run("iptables", "-A", GUARD, "-i", BRIDGE, "-j", "DROP")
    _run("iptables", "-A", GUARD, "-o", BRIDGE, "-j", "DROP")
    if not forwarding:
        _run("iptables", "-A", GUARD, "-j", "DROP")
    _quiet("iptables", "-D", "INPUT", "-d", RESERVED, "-j", INPUT_GUARD)
    _quiet("iptables", "-F", INPUT_GUARD)
    _quiet("iptables", "-X", INPUT_GUARD)
    _run("iptables", "-N", INPUT_GUARD)
    changes.made("the input guard", _drop_input_guard)
    _run("iptables", "-A", INPUT_GUARD, "-i", "lo", "-j", "ACCEPT")
    _run("iptables", "-A", INPUT_GUARD, "-i", BRIDGE, "-j", "ACCEPT")
    _run("iptables", "-A", INPUT_GUARD, "-j", "DROP")
    guard_first()
    _write("net/bridge/bridge-nf-call-iptables", "1")  # Services between pods of the bridge
    _write("net/ipv4/ip_forward", "1")


def guard_first() -> None:
    """Put the guards first in ``FORWARD`` and ``INPUT`` again (kube-proxy inserts its own
    rules there)."""
    _quiet("iptables", "-D", "FORWARD", "-j", GUARD)
    _run("iptables", "-I", "FORWARD", "1", "-j", GUARD)
    _quiet("iptables", "-D", "INPUT", "-d", RESERVED, "-j", INPUT_GUARD)
    _run("iptables", "-I", "INPUT", "1", "-d", RESERVED, "-j", INPUT_GUARD)


def _drop_input_guard() -> None:
    while subprocess.run(["iptables", "-D", "INPUT", "-d", RESERVED, "-j", INPUT_GUARD],
                         capture_output=True).returncode == 0:
        pass
    _quiet("iptables", "-F", INPUT_GUARD)
    _quiet("iptables", "-X", INPUT_GUARD)


def route_of(prefix: str) -> list[str]:
    """The main table's route for exactly ``prefix``, as ``ip route`` words (empty: none)."""
    done = subprocess.run(["ip", "route", "show", "exact", prefix], capture_output=True,
                          text=True)
    line = done.stdout.strip().splitlines()[0] if done.stdout.strip() else ""
    # state the kernel reports, not a route's own words: left out to write it back
    return [w for w in line.split() if w not in ("linkdown", "dead", "offload", "trap")]


def _put_back_route(held: list[str]) -> None:
    """Remove the node's route for the range, and put back the one it replaced, if any."""
    _quiet("ip", "route", "del", "unreachable", RESERVED)
    if held:
        _run("ip", "route", "replace", *held)


def _drop_guard() -> None:
    while subprocess.run(["iptables", "-D", "FORWARD", "-j", GUARD],
                         capture_output=True).returncode == 0:
        pass
    _quiet("iptables", "-F", GUARD)
    _quiet("iptables", "-X", GUARD)


def cni_config(data_dir: Path) -> str:
    """The bridge network's CNI configuration: pods on ``BRIDGE``, addresses of ``POD_RANGE``
    kept in ``data_dir``, and routes for the reserved range alone."""
    return json.dumps({
        "cniVersion": "0.4.0", "name": "kcg-node",
        "plugins": [
            {"type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": False,
             "hairpinMode": True,
             "ipam": {"type": "host-local", "dataDir": str(data_dir),
                      "ranges": [[{"subnet": POD_RANGE, "gateway": GATEWAY,
                                   "rangeStart": POD_RANGE.rsplit(".", 1)[0] + ".10"}]],
                      "routes": [{"dst": RESERVED}]}}]}, indent=2)
